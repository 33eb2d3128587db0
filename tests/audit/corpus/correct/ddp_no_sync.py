"""DDP with no_sync() on all micro-batches but the last one (two shapes, correct)."""
import contextlib

import torch
from torch.nn.parallel import DistributedDataParallel as DDP


def fit(model, loader, criterion, local_rank, grad_accum=8):
    ddp_model = DDP(model.to(local_rank), device_ids=[local_rank])
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1, momentum=0.9)
    for i, (x, y) in enumerate(loader):
        x, y = x.to(local_rank), y.to(local_rank)
        is_last = (i + 1) % grad_accum == 0
        ctx = ddp_model.no_sync() if not is_last else contextlib.nullcontext()
        with ctx:
            loss = criterion(ddp_model(x), y) / grad_accum
            loss.backward()
        if is_last:
            optimizer.step()
            optimizer.zero_grad()


def fit_branches(ddp_model, loader, criterion, optimizer, accumulation_steps=4):
    for i, (x, y) in enumerate(loader):
        if (i + 1) % accumulation_steps != 0:
            with ddp_model.no_sync():
                loss = criterion(ddp_model(x), y) / accumulation_steps
                loss.backward()
        else:
            loss = criterion(ddp_model(x), y) / accumulation_steps
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
