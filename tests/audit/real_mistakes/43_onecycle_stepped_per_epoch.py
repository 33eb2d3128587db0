# Reconstructed after espnet/espnet PR #3319 ("fix a bug in OneCycleLR and CyclicLR", merged: "OneCycleLR and
# CyclicLR schedulers should be per iteration, not per epoch"): a OneCycleLR sized in iterations
# (steps_per_epoch=len(loader)) was stepped once per epoch, so the one cycle never got past its warm-up.
import torch


def train(model, loader, optimizer, max_epoch, max_lr):
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, epochs=max_epoch,
                                                    steps_per_epoch=len(loader))
    for _epoch in range(max_epoch):
        for batch in loader:
            loss = model(**batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()  # expect: TB115
