import torch
from torch.optim.lr_scheduler import LambdaLR

WARMUP = 1000


def make_scheduler(optimizer, total_steps):
    def warmup_then_decay(step):
        if step < WARMUP:
            return step / WARMUP  # expect: TB304
        return max(0.0, (total_steps - step) / (total_steps - WARMUP))
    return LambdaLR(optimizer, lr_lambda=warmup_then_decay)


def simple(optimizer, warmup_epochs):
    return LambdaLR(optimizer, lambda epoch: epoch / warmup_epochs if epoch < warmup_epochs else 1.0)  # expect: TB304
