"""SAM / ASAM from a recipe."""

from __future__ import annotations

import math

import pytest
import torch

from trickbag.optim import SAM

from . import helpers as h

BASE, Hook, build_run, PLAIN_SGD = h.BASE, h.Hook, h.build_run, h.PLAIN_SGD


@pytest.mark.parametrize(
    "overrides, base, rho, adaptive",
    [
        (["optim.name=adamw"], torch.optim.AdamW, 0.05, False),
        (["tricks.sam.adaptive=true"], torch.optim.SGD, 0.5, True),
        (["tricks.sam.rho=0.2"], torch.optim.SGD, 0.2, False),
    ],
)
def test_sam_wraps_the_recipe_optimizer(overrides, base, rho, adaptive):
    _, ctx = build_run("tricks.sam.enabled=true", *overrides)
    opt = ctx.optimizer
    assert isinstance(opt, SAM) and type(opt.base_optimizer) is base and opt.takes_closure
    assert all(g["rho"] == rho and g["adaptive"] is adaptive for g in opt.param_groups)
    assert opt.param_groups[0]["lr"] == pytest.approx(ctx.recipe.optim.lr)
    assert ctx.scheduler.optimizer is opt  # the schedule changes the LR SAM's base optimizer uses


@pytest.mark.parametrize("precision", ["32", "bf16"])
def test_sam_trains_with_two_passes_per_update(precision):
    passes = {"first": 0, "closure": 0}

    def count(s):
        passes["closure" if s.closure_pass else "first"] += 1

    trainer, ctx = build_run("tricks.sam.enabled=true", f"train.precision={precision}", "train.epochs=2",
                             last=Hook(loss=count))
    w0 = [p.detach().clone() for p in ctx.model.parameters()]
    state = trainer.fit()
    assert passes["first"] == passes["closure"] == 2 * len(ctx.train_loader)
    assert state.step == 2 * len(ctx.train_loader) and state.skipped_steps == 0
    assert all(math.isfinite(r["train/loss"]) and math.isfinite(r["val/loss"]) for r in state.history)
    assert state.history[-1]["train/loss"] < state.history[0]["train/loss"]
    assert any(not torch.equal(a, b) for a, b in zip(w0, ctx.model.parameters()))
