import torch


def train(model, next_batch, loss_fn, optimizer, scheduler, steps=1000, accum=8):
    for step in range(steps):
        for _ in range(accum):
            x, y = next_batch()
            (loss_fn(model(x), y) / accum).backward()
            scheduler.step()  # expect: TB102
        optimizer.step()
        optimizer.zero_grad()
