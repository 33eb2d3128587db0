"""Gradients set to None by hand, a train_step helper with zero_grad, a per-run clip helper (correct)."""
import torch


def train_step(model, batch, optimizer, loss_fn):
    optimizer.zero_grad()
    x, y = batch
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


def loop_with_helper(model, loader, optimizer, loss_fn, epochs=2):
    losses = []
    for _ in range(epochs):
        for batch in loader:
            losses.append(train_step(model, batch, optimizer, loss_fn).item())
    return losses


def loop_manual_zero(model, loader, optimizer, loss_fn):
    for x, y in loader:
        for p in model.parameters():
            p.grad = None
        loss_fn(model(x), y).backward()
        optimizer.step()
