"""Gradient and optimizer tricks from a recipe: grad-norm logging, clipping (norm / value / AGC), SAM / ASAM."""

from __future__ import annotations

import csv
import math

import pytest
import torch

from trickbag.config import load_recipe
from trickbag.errors import ConflictError
from trickbag.optim import SAM


import helpers_a as h  # noqa: E402 (tests/tricks is on sys.path under pytest)
BASE, Hook, build_run, PLAIN_SGD = h.BASE, h.Hook, h.build_run, h.PLAIN_SGD


def _grads(state):
    return [p.grad.detach().clone() if p.grad is not None else None
            for g in state.optimizer.param_groups for p in g["params"]]


def _naive_norm(grads):
    return math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads if g is not None))


# --------------------------------------------------------------------------- grad-norm logging
def test_grad_norm_per_update_and_epoch_mean():
    norms = []

    def rec(s):
        norms.append(float(s.grad_norm))
        assert float(s.grad_norm) == pytest.approx(_naive_norm(_grads(s)), rel=1e-5)

    trainer, _ = build_run("tricks.grad_norm.enabled=true", "train.epochs=2", last=Hook(after_backward=rec))
    state = trainer.fit()
    per_epoch = len(norms) // 2
    assert per_epoch == state.step // 2 > 1
    for e, row in enumerate(state.history):
        chunk = norms[e * per_epoch:(e + 1) * per_epoch]
        assert row["train/grad_norm"] == pytest.approx(sum(chunk) / len(chunk), rel=1e-6)
        assert row["train/grad_norm_max"] == pytest.approx(max(chunk), rel=1e-6)


def test_grad_norm_in_metrics_csv_step_rows(tmp_path):
    from trickbag.train.run import train_recipe

    recipe = load_recipe("digits", [*BASE, "tricks.grad_norm.enabled=true", "log.every_steps=1",
                                    f"run.dir={tmp_path}", "run.name=r"])
    train_recipe(recipe, quiet=True)
    rows = list(csv.DictReader(open(tmp_path / "r" / "metrics.csv")))
    steps = [float(r["train/grad_norm"]) for r in rows if r.get("train/step_loss")]
    epoch = [r for r in rows if r.get("train/loss")]
    assert len(steps) > 1 and all(v > 0 for v in steps)
    assert float(epoch[-1]["train/grad_norm"]) == pytest.approx(sum(steps) / len(steps), rel=1e-4)


# --------------------------------------------------------------------------- clipping
def _agc_reference(weights, grads, head, factor, eps):
    """AGC written out per unit (row of a >= 2-D weight, whole tensor otherwise), head left alone."""
    out = []
    for i, (w, g) in enumerate(zip(weights, grads)):
        if i in head:
            out.append(g.clone())
            continue
        w2 = w.reshape(w.shape[0], -1) if w.dim() > 1 else w.reshape(1, -1)
        g2 = g.reshape(g.shape[0], -1).clone() if g.dim() > 1 else g.reshape(1, -1).clone()
        for r in range(w2.shape[0]):
            limit = factor * max(float(w2[r].norm()), eps)
            gn = float(g2[r].norm())
            if gn > limit:
                g2[r] *= limit / gn
        out.append(g2.reshape(g.shape))
    return out


@pytest.mark.parametrize("mode", ["norm", "value", "agc"])
def test_clip_modes_clip_the_gradients_the_optimizer_uses(mode):
    lr, max_norm, value, factor = 0.1, 0.05, 0.002, 0.01
    pre, post, before, after, norms = [], [], [], [], []

    def rec_post(s):
        post.append(_grads(s))
        before.append([p.detach().clone() for g in s.optimizer.param_groups for p in g["params"]])
        norms.append(s.grad_norm)

    trainer, ctx = build_run(
        *PLAIN_SGD, f"optim.lr={lr}", "tricks.clip.enabled=true", f"tricks.clip.mode={mode}",
        f"tricks.clip.max_norm={max_norm}", f"tricks.clip.value={value}", f"tricks.clip.clip_factor={factor}",
        first=Hook(after_backward=lambda s: pre.append(_grads(s))),
        last=Hook(after_backward=rec_post,
                  step=lambda s: after.append([p.detach().clone() for g in s.optimizer.param_groups
                                               for p in g["params"]])),
    )
    params = [p for g in ctx.optimizer.param_groups for p in g["params"]]
    head = {i for i, p in enumerate(params) if any(p is q for q in ctx.model.head.parameters())}  # SmallCNN
    trainer.fit()
    assert len(pre) == len(post) == len(after) > 1
    acted = False
    for g0, g1, w0, w1, n in zip(pre, post, before, after, norms):
        if mode == "norm":
            total = _naive_norm(g0)
            coef = min(1.0, max_norm / (total + 1e-6))
            expected = [g * coef for g in g0]
            assert float(n) == pytest.approx(total, rel=1e-5)
            acted |= coef < 1
        elif mode == "value":
            expected = [g.clamp(-value, value) for g in g0]
            assert float(n) == pytest.approx(_naive_norm(g0), rel=1e-5)
            acted |= any((g.abs() > value).any() for g in g0)
        else:
            expected = _agc_reference(w0, g0, head, factor, 1e-3)
            acted |= any(not torch.allclose(a, b) for a, b in zip(expected, g0))
        for e, g in zip(expected, g1):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-8)
        for p0, p1, g in zip(w0, w1, g1):  # the step used exactly the clipped gradient
            torch.testing.assert_close(p1, p0 - lr * g, rtol=0, atol=1e-6)
    assert acted, "the thresholds are small enough that clipping happened"
    if mode == "agc":
        assert head and all(torch.equal(pre[0][i], post[0][i]) for i in head), "the classifier is not clipped"


def test_train_clip_and_tricks_clip_together_are_refused():
    with pytest.raises(ConflictError, match="train.clip=1.0 and tricks.clip both clip"):
        build_run("train.clip=1.0", "tricks.clip.enabled=true")


# --------------------------------------------------------------------------- SAM / ASAM
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
