import torch
from torch.nn.parallel import DistributedDataParallel


def train(module, loader, optimizer, loss_fn, rank, accumulation=4):
    model = DistributedDataParallel(module, device_ids=[rank])
    for i, (x, y) in enumerate(loader):
        with model.no_sync():  # expect: TB111
            loss = loss_fn(model(x), y) / accumulation
            loss.backward()
        if (i + 1) % accumulation == 0:
            optimizer.step()
            optimizer.zero_grad()
