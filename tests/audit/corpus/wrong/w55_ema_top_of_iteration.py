import torch
from trickbag import EMA


def train(model, loader, loss_fn, optimizer, decay=0.999):
    ema = EMA(model, decay=decay)
    for batch in loader:
        ema.update(model)  # expect: TB108
        optimizer.zero_grad()
        loss_fn(model(batch[0]), batch[1]).backward()
        optimizer.step()
