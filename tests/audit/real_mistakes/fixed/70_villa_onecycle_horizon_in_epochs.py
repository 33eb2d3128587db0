# Fixed version of ../70_villa_onecycle_horizon_in_epochs.py: silent on the codes that file expects.
import torch


def train(model, loss_fn, loader, max_epoch, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=max_epoch * len(loader))
    for epoch in range(max_epoch):  # noqa: B007
        for batch in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(batch["image"]), batch["label"])
            loss.backward()
            optimizer.step()
            scheduler.step()  # not: TB115
