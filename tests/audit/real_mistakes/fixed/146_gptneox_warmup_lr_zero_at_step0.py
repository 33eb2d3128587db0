# Fixed version of ../146_gptneox_warmup_lr_zero_at_step0.py: silent on the codes that file expects.
import math

import torch


class AnnealingLR:
    """Anneals the learning rate, with linear warmup."""

    def __init__(self, optimizer: torch.optim.Optimizer, start_lr: float, warmup_iter: int, total_iters: int,
                 decay_style: str = "cosine", last_iter: int = 0, min_lr: float = 0.0):
        self.optimizer = optimizer
        self.start_lr = start_lr
        self.min_lr = min_lr
        self.warmup_iter = warmup_iter
        self.num_iters = last_iter
        self.end_iter = total_iters
        self.decay_style = decay_style
        self.step(self.num_iters)

    def get_lr(self):
        num_iters_ = min(self.num_iters, self.end_iter - self.warmup_iter)
        if self.warmup_iter > 0 and self.num_iters <= self.warmup_iter:
            return float(self.start_lr) * max(1, num_iters_) / self.warmup_iter  # not: TB304
        num_iters_ = num_iters_ - self.warmup_iter
        if self.decay_style == "linear":
            lr = self.start_lr * (self.end_iter - num_iters_) / self.end_iter
        elif self.decay_style == "cosine":
            lr = self.start_lr / 2.0 * (math.cos(math.pi * num_iters_ / self.end_iter) + 1)
        else:
            lr = self.start_lr
        return max(lr, self.min_lr)

    def step(self, step_num=None):
        if step_num is None:
            step_num = self.num_iters + 1
        self.num_iters = step_num
        new_lr = self.get_lr()
        for group in self.optimizer.param_groups:
            group["lr"] = new_lr

    def state_dict(self):
        return {"start_lr": self.start_lr, "warmup_iter": self.warmup_iter, "num_iters": self.num_iters,
                "decay_style": self.decay_style, "end_iter": self.end_iter, "min_lr": self.min_lr}


def train(model, optimizer, lr_scheduler, data_iterator, train_iters: int):
    model.train()
    for iteration in range(train_iters):
        batch = next(data_iterator)
        loss = model(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        lr_scheduler.step()
