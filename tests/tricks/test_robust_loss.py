"""The noise-robust loss from a recipe: the back-propagated loss against the papers' per-sample formulas
(written here in float64), composed with label smoothing, class weights and mixed targets; refusals."""

from __future__ import annotations

import math

import pytest
import torch

from trickbag.errors import ConflictError, RecipeError

from . import helpers as h

C, Hook, build_run, record_losses, onehot = h.C, h.Hook, h.build_run, h.record_losses, h.onehot


def _sce(out, t, alpha=0.1, beta=1.0):
    """Per sample: alpha * CE(t) + beta * -log(1e-4) * sum_k t_k (1 - p_k) (the paper's RCE of each one-hot k)."""
    p = torch.softmax(out.double(), 1)
    return alpha * -(t.double() * p.log()).sum(1) - beta * math.log(1e-4) * (t.double() * (1 - p)).sum(1)


def _gce(out, t, q=0.7):
    p = torch.softmax(out.double(), 1)
    return (t.double() * (1 - p**q) / q).sum(1)


def _run(*overrides):
    losses = []
    trainer, ctx = build_run(*overrides, last=Hook(loss=lambda s: record_losses(s, losses)))
    trainer.fit()
    assert losses
    return losses, ctx


def test_default_is_symmetric_cross_entropy():
    losses, _ = _run("tricks.robust_loss.enabled=true")
    for out, y, _, loss in losses:
        torch.testing.assert_close(loss.double(), _sce(out, onehot(y)).mean(), rtol=1e-5, atol=1e-6)


def test_gce_with_label_smoothing_and_class_weights():
    q, eps = 0.5, 0.2
    losses, ctx = _run("tricks.robust_loss.enabled=true", "tricks.robust_loss.kind=gce", f"tricks.robust_loss.q={q}",
                       "tricks.label_smoothing.enabled=true", f"tricks.label_smoothing.eps={eps}",
                       "tricks.class_balanced.enabled=true", "tricks.class_balanced.beta=0.9")
    train = ctx.data.train
    counts = torch.bincount(torch.tensor([int(train[i][1]) for i in range(len(train))]), minlength=C).double()
    w = (1 - 0.9) / (1 - 0.9**counts)  # Cui et al. 2019, normalised to sum to the number of classes
    w = w / w.sum() * C
    for out, y, _, loss in losses:
        t = (1 - eps) * onehot(y).double() + eps / C
        torch.testing.assert_close(loss.double(), (_gce(out, t, q) * (t @ w)).mean(), rtol=1e-5, atol=1e-6)


def test_mixed_targets_take_the_loss_linearly():
    losses, _ = _run("tricks.robust_loss.enabled=true", "tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0.4",
                     "tricks.mix.cutmix_alpha=0")
    for out, y, _, loss in losses:
        assert y.is_floating_point() and y.shape == out.shape  # the mixed soft targets the loss was given
        torch.testing.assert_close(loss.double(), _sce(out, y).mean(), rtol=1e-5, atol=1e-6)


def test_refusals_name_the_keys():
    with pytest.raises(ConflictError, match="tricks.focal and tricks.robust_loss"):
        build_run("tricks.robust_loss.enabled=true", "tricks.focal.enabled=true")
    with pytest.raises(RecipeError, match="robust_loss"):
        build_run("tricks.robust_loss.enabled=true", "tricks.robust_loss.q=0")
    with pytest.raises(RecipeError, match="robust_loss"):
        build_run("tricks.robust_loss.enabled=true", "tricks.robust_loss.kind=mae")
