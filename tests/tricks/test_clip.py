"""Clipping from a recipe: norm, value and AGC on the gradients the optimizer uses."""

from __future__ import annotations

import pytest
import torch

from trickbag.errors import ConflictError

from .helpers import PLAIN_SGD, Hook, build_run, grads_of, naive_norm


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

    def rec_post(opt, *args):  # the optimizer's step pre-hook: the gradients it is about to use
        post.append([p.grad.detach().clone() for g in opt.param_groups for p in g["params"]])
        before.append([p.detach().clone() for g in opt.param_groups for p in g["params"]])

    def rec_step(s):
        norms.append(s.grad_norm)
        after.append([p.detach().clone() for g in s.optimizer.param_groups for p in g["params"]])

    trainer, ctx = build_run(
        *PLAIN_SGD, f"optim.lr={lr}", "tricks.clip.enabled=true", f"tricks.clip.mode={mode}",
        f"tricks.clip.max_norm={max_norm}", f"tricks.clip.value={value}", f"tricks.clip.clip_factor={factor}",
        first=Hook(after_backward=lambda s: pre.append(grads_of(s))), last=Hook(step=rec_step),
    )
    ctx.optimizer.register_step_pre_hook(rec_post)
    params = [p for g in ctx.optimizer.param_groups for p in g["params"]]
    head = {i for i, p in enumerate(params) if any(p is q for q in ctx.model.head.parameters())}  # SmallCNN
    trainer.fit()
    assert len(pre) == len(post) == len(after) > 1
    acted = False
    for g0, g1, w0, w1, n in zip(pre, post, before, after, norms):
        if mode == "norm":
            total = naive_norm(g0)
            coef = min(1.0, max_norm / (total + 1e-6))
            expected = [g * coef for g in g0]
            assert float(n) == pytest.approx(total, rel=1e-5)
            acted |= coef < 1
        elif mode == "value":
            expected = [g.clamp(-value, value) for g in g0]
            assert float(n) == pytest.approx(naive_norm(g0), rel=1e-5)
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
