"""Probe-8 shapes: a setattr typo, partial(torch.load), cuDNN flags split between the module and a
function it runs, a warm-up factory returning its closure, a step method that keeps its loss."""
import functools

import torch
import torch.backends.cudnn as cb
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

cb.benchmark = True  # expect: TB405
read_checkpoint = functools.partial(torch.load, map_location="cpu")  # TB403 in --all only: the path comes later


def reproducible(seed: int):
    torch.manual_seed(seed)
    cb.deterministic = True


def linear_warmup(total: int):
    def scale(it):
        return it / total if it < total else 1.0  # expect: TB304
    return scale


class Finetuner:
    def __init__(self, net: nn.Module, path: str):
        self.net = net
        self.net.load_state_dict(read_checkpoint(path))
        for name, p in net.named_parameters():
            if name.startswith("stem."):
                setattr(p, "requires_grd", False)  # expect: TB302
        self.opt = torch.optim.AdamW(net.parameters(), lr=3e-4)
        self.sched = LambdaLR(self.opt, linear_warmup(500))
        self.running = 0.0

    def train_batch(self, x, y):
        self.opt.zero_grad()
        loss = nn.functional.cross_entropy(self.net(x), y)
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.running += loss  # expect: TB204


reproducible(7)
