"""Probe-8 near misses: setattr with the right name, partial(torch.load, weights_only=True), cuDNN
flags in exclusive branches, a warm-up factory starting above 0, a step method keeping floats."""
import functools
import sys

import torch
import torch.backends.cudnn as cb
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

read_checkpoint = functools.partial(torch.load, map_location="cpu", weights_only=True)


def reproducible(seed: int):
    torch.manual_seed(seed)
    cb.deterministic = True


def linear_warmup(total: int):
    def scale(it):
        return (it + 1) / total if it < total else 1.0
    return scale


class Finetuner:
    def __init__(self, net: nn.Module, path: str):
        self.net = net
        self.net.load_state_dict(read_checkpoint(path))
        for name, p in net.named_parameters():
            if name.startswith("stem."):
                setattr(p, "requires_grad", False)
        self.opt = torch.optim.AdamW(net.parameters(), lr=3e-4)
        self.sched = LambdaLR(self.opt, linear_warmup(500))
        self.running = 0.0

    def train_batch(self, x, y):
        self.opt.zero_grad()
        loss = nn.functional.cross_entropy(self.net(x), y)
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.running += loss.item()


if "--fast" in sys.argv:
    cb.benchmark = True
else:
    reproducible(7)
