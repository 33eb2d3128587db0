"""SWA: averaged per epoch after the start epoch, with its own schedule (correct)."""
import torch
from torch.optim.swa_utils import SWALR, AveragedModel, update_bn


def train_swa(model, loader, loss_fn, epochs=20, swa_start=15):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
    swa_model = AveragedModel(model)
    swa_scheduler = SWALR(optimizer, swa_lr=0.05)
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        if epoch > swa_start:
            swa_model.update_parameters(model)
            swa_scheduler.step()
        else:
            scheduler.step()
    update_bn(loader, swa_model)
    return swa_model
