"""Linear warm-up + cosine decay with SequentialLR, stepped once per optimizer step (correct)."""
import math

import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, LinearLR, SequentialLR


def build(optimizer, warmup_steps, total_steps):
    warmup = LinearLR(optimizer, start_factor=0.01, total_iters=warmup_steps)
    cosine = CosineAnnealingLR(optimizer, T_max=total_steps - warmup_steps)
    return SequentialLR(optimizer, schedulers=[warmup, cosine], milestones=[warmup_steps])


def lr_lambda(current_step, warmup=500, total=10000):
    if current_step < warmup:
        return (current_step + 1) / warmup
    progress = (current_step - warmup) / max(1, total - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def train(model, loader, loss_fn, warmup_steps=100, total_steps=1000):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = build(optimizer, warmup_steps, total_steps)
    other = LambdaLR(optimizer, lr_lambda=lambda s: min(1.0, (s + 1) / warmup_steps))
    for step, (x, y) in zip(range(total_steps), loader):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
    return other
