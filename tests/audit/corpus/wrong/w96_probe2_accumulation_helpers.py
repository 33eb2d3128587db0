import torch
import torch.nn.functional as F


class Trainer:
    def _forward_backward(self, batch):
        x, y = batch
        loss = F.cross_entropy(self.model(x), y) / self.accum
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # expect: TB109
        self.ema.update(self.model)  # expect: TB108
        return loss.item()

    def _update(self):
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad()

    def fit(self, loader):
        for i, batch in enumerate(loader):
            self._forward_backward(batch)
            if (i + 1) % self.accum == 0:
                self._update()


def inner(model, x, y, opt, accum):
    opt.zero_grad()  # expect: TB103
    (F.cross_entropy(model(x), y) / accum).backward()


def outer(model, batch, opt, accum):
    inner(model, batch[0], batch[1], opt, accum)


def train(model, loader, opt, accum=4):
    for step, batch in enumerate(loader):
        outer(model, batch, opt, accum)
        if (step + 1) % accum == 0:
            opt.step()
            opt.zero_grad()


def forward_backward(model, x, y, accum):
    (F.cross_entropy(model(x), y) / accum).backward()


def train_nested(model, loader, opt, sched, accum=4):
    for xs, ys in loader:
        for k in range(accum):
            forward_backward(model, xs[k], ys[k], accum)
            sched.step()  # expect: TB102
        opt.step()
        opt.zero_grad()


class SelfCountingUpdate:
    def maybe_step(self, i):
        if (i + 1) % self.accum == 0:
            self.opt.step()
            self.opt.zero_grad()

    def train_epoch(self, loader):
        for i, (x, y) in enumerate(loader):
            self.opt.zero_grad()  # expect: TB103
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()  # expect: TB105
            self.sched.step()  # expect: TB102
            self.maybe_step(i)


def optimizer_step(optimizer, scheduler):
    optimizer.step()  # expect: TB104
    scheduler.step()


def train_without_zeroing(model, loader, optimizer, scheduler):
    for x, y in loader:
        F.cross_entropy(model(x), y).backward()
        optimizer_step(optimizer, scheduler)
