import torch


def train(model, chunks_of, loss_fn, optimizer, steps=100, n_micro=4):
    for step in range(steps):
        for micro in range(n_micro):
            x, y = chunks_of(step, micro)
            optimizer.zero_grad()  # expect: TB103
            loss = loss_fn(model(x), y) / n_micro
            loss.backward()
        optimizer.step()
