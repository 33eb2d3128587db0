# TB304 warmup-starts-at-zero: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import math

from torch.optim.lr_scheduler import LambdaLR


def zero_at_step_zero(optimizer, warmup_steps):
    return LambdaLR(optimizer, lambda step: min(1.0, step / warmup_steps))  # expect: TB304


def one_step_in(optimizer, warmup_steps):
    return LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup_steps))


def get_lr(it, learning_rate, warmup_iters, lr_decay_iters, min_lr):
    if it < warmup_iters:
        return learning_rate * it / warmup_iters  # expect: TB304
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


def get_lr_shifted(it, learning_rate, warmup_iters):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    return learning_rate


def train(model, optimizer, batches, max_iters, hp):
    for iter_num in range(max_iters):
        lr = get_lr(iter_num, hp.lr, hp.warmup, hp.decay, hp.min_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        step(model, optimizer, next(batches))


def train_shifted(model, optimizer, batches, max_iters, hp):
    for iter_num in range(max_iters):
        for group in optimizer.param_groups:
            group["lr"] = get_lr_shifted(iter_num, hp.lr, hp.warmup)
        step(model, optimizer, next(batches))


def decay(it, learning_rate, warmup_iters):
    if it < warmup_iters:
        return learning_rate * it / warmup_iters
    return learning_rate


def train_from_one(model, optimizer, batches, max_iters, hp):
    for iter_num in range(1, max_iters + 1):  # starts at 1: the factor is never 0
        for group in optimizer.param_groups:
            group["lr"] = decay(iter_num, hp.lr, hp.warmup)
        step(model, optimizer, next(batches))
