"""Accumulation split across helpers, each call in its place (correct)."""
import torch.nn.functional as F


def one_step(model, x, y, opt):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


def train_plain(model, loader, opt):
    for x, y in loader:
        one_step(model, x, y, opt)


def micro(model, x, y, accum):
    (F.cross_entropy(model(x), y) / accum).backward()


def train_accum(model, loader, opt, sched, accum=4):
    opt.zero_grad()
    for i, (x, y) in enumerate(loader):
        micro(model, x, y, accum)
        if (i + 1) % accum == 0:
            opt.step()
            sched.step()
            opt.zero_grad()


class SelfCountingUpdate:
    def maybe_step(self, i):
        if (i + 1) % self.accum == 0:
            self.opt.step()
            self.sched.step()
            self.opt.zero_grad()

    def train_epoch(self, loader):
        for i, (x, y) in enumerate(loader):
            loss = F.cross_entropy(self.model(x), y) / self.accum
            loss.backward()
            self.maybe_step(i)
