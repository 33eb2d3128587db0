# TB106 clip-before-unscale: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
from torch.nn.utils import clip_grad_norm_


def clip_scaled_gradients(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TB106
        scaler.step(optimizer)
        scaler.update()


def unscale_first(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()


def clip_in_the_branch_without_a_scaler(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        backward(loss_fn(model(x), y), scaler)
        if scaler is not None:
            scaler.unscale_(optimizer)
            clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        else:
            clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()


def backward(loss, scaler):
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()


def accelerate_clips_unscaled(accelerator, model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        accelerator.backward(loss_fn(model(x), y))
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()


class AmpEngine:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def backward_loss(self, loss):
        self.scaler.scale(loss).backward()

    def step(self, optimizer):
        self.scaler.step(optimizer)
        self.scaler.update()


class Loop:
    def clip(self):
        clip_grad_norm_(self.model.parameters(), 1.0)

    def run_batch(self, batch):
        self.engine.backward_loss(self.loss_fn(self.model(batch[0]), batch[1]))
        self.clip()  # expect: TB106
        self.engine.step(self.optimizer)
        self.optimizer.zero_grad()
