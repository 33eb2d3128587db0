import torch
import torch.nn.functional as F


def backward_step(model, batch, scheduler, accum):
    x, y = batch
    loss = F.cross_entropy(model(x), y) / accum
    loss.backward()
    scheduler.step()  # expect: TB102
    return loss.item()


def train(model, loader, optimizer, scheduler, accum=4):
    model.train()
    optimizer.zero_grad()
    for step, batch in enumerate(loader):
        backward_step(model, batch, scheduler, accum)
        if step % accum == accum - 1:
            optimizer.step()
            optimizer.zero_grad()
