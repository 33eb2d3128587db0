# TB109 clip-per-micro-batch: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
from torch.nn.utils import clip_grad_norm_


def clip_every_micro_batch(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TB109
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()


def clip_once_per_update(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()


def clip_without_accumulation(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()


def accelerate_clip_every_micro_batch(accelerator, model, loader, optimizer):
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            accelerator.clip_grad_norm_(model.parameters(), 1.0)  # expect: TB109
            optimizer.step()
            optimizer.zero_grad()


def accelerate_clip_on_sync(accelerator, model, loader, optimizer):
    for x, y in loader:
        with accelerator.accumulate(model):
            accelerator.backward(loss_fn(model(x), y))
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()


class Callback:
    def on_batch_end(self, loss):
        self.count += 1
        do_step = self.count % self.accum == 0
        (loss / self.accum).backward()
        clip_grad_norm_(self.model.parameters(), 1.0)  # expect: TB109
        if do_step:
            self.optimizer.step()
            self.optimizer.zero_grad()
