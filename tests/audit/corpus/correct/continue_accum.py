"""Accumulation written with `continue` and with `step % k == k - 1` (correct)."""
import torch


def loop_continue(model, loader, criterion, optimizer, scheduler, k=4):
    for it, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / k
        loss.backward()
        if (it + 1) % k != 0:
            continue
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()


def loop_mod(model, loader, criterion, optimizer, accum=2):
    optimizer.zero_grad()
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = criterion(out, y)
        (loss / accum).backward()
        if step % accum == accum - 1:
            optimizer.step()
            optimizer.zero_grad()
