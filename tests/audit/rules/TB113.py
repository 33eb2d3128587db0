# TB113 clip-after-step: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
from torch.nn.utils import clip_grad_norm_


def clip_after_step(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # expect: TB113


def clip_value_after_step_under_an_option(model, loader, optimizer, max_norm):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        if max_norm:
            torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)  # expect: TB113


def clip_helper(model):
    clip_grad_norm_(model.parameters(), 1.0)


class Trainer:
    def train_step(self, x, y):
        self.optimizer.zero_grad()
        self.loss_fn(self.model(x), y).backward()
        self.optimizer.step()
        clip_helper(self.model)  # expect: TB113


def clip_before_step(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()


def two_models(actor, critic, loader, actor_opt, critic_opt):
    for batch in loader:
        actor_opt.zero_grad()
        critic_opt.zero_grad()
        (actor_loss(actor, batch) + critic_loss(critic, batch)).backward()
        clip_grad_norm_(actor.parameters(), 0.5)
        actor_opt.step()
        clip_grad_norm_(critic.parameters(), 0.5)  # the critic's clip, before the critic's step
        critic_opt.step()


def gan(gen, disc, loader, g_opt, d_opt):
    for real in loader:
        d_opt.zero_grad()
        d_loss(disc, gen, real).backward()
        d_opt.step()
        for p in disc.parameters():  # weight clipping (WGAN), not gradient clipping
            p.data.clamp_(-0.01, 0.01)
        g_opt.zero_grad()
        g_loss(disc, gen).backward()  # a new backward: this clip is for the next step
        clip_grad_norm_(gen.parameters(), 1.0)
        g_opt.step()


def accumulate(model, loader, optimizer, accum):
    for i, (x, y) in enumerate(loader):
        (loss_fn(model(x), y) / accum).backward()
        if (i + 1) % accum == 0:
            clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()


def step_or_clip(model, loader, optimizer, use_sam):
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        if use_sam:
            optimizer.step()
        else:
            clip_grad_norm_(model.parameters(), 1.0)


def clip_then_step_next_iteration(model, loader, optimizer):
    for x, y in loader:
        optimizer.step()
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        clip_grad_norm_(model.parameters(), 1.0)  # used by the step at the top of the next iteration
