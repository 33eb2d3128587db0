# Fixed version of ../43_onecycle_stepped_per_epoch.py: silent on the codes that file expects.
import torch


def train_fixed(model, loader, optimizer, max_epoch, max_lr):
    one_cycle = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, epochs=max_epoch,
                                                    steps_per_epoch=len(loader))
    for _epoch in range(max_epoch):
        for batch in loader:
            loss = model(**batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            one_cycle.step()  # not: TB115
