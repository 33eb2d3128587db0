import math

import torch
from torch.backends import cudnn as cdnn
from torch.optim.lr_scheduler import LambdaLR as Lambda


def setup(seed):
    torch.manual_seed(seed)
    cdnn.deterministic = True
    if torch.cuda.is_available():
        cdnn.benchmark = True  # expect: TB405


class WarmCosine:
    def __init__(self, warmup, total):
        self.warmup, self.total = warmup, total

    def __call__(self, step):
        if step < self.warmup:
            return step / self.warmup  # expect: TB304
        t = (step - self.warmup) / max(1, self.total - self.warmup)
        return 0.5 * (1 + math.cos(math.pi * t))


def make_schedule(optimizer, warmup, total):
    return Lambda(optimizer, WarmCosine(warmup, total))
