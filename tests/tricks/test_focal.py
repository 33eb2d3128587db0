"""Focal loss from a recipe: against a naive per-sample formula."""

from __future__ import annotations

import pytest
import torch

from trickbag.errors import RecipeError

from . import helpers as h

BASE, C, Hook, build_run, record_losses, onehot = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.onehot


def test_focal_loss_with_per_class_alpha():
    alpha, gamma, losses = [0.1, 0.2, 0.3, 0.4], 2.0, []
    trainer, ctx = build_run("tricks.focal.enabled=true", f"tricks.focal.gamma={gamma}",
                             f"tricks.focal.alpha=[{','.join(map(str, alpha))}]",
                             last=Hook(loss=lambda s: record_losses(s, losses)))
    trainer.fit()
    for out, y, _, loss in losses:
        naive = h.naive_focal(out, onehot(y), gamma, torch.tensor(alpha)).mean()
        torch.testing.assert_close(loss.double(), naive, rtol=1e-5, atol=1e-6)
    with pytest.raises(RecipeError, match="4 classes"):
        build_run("tricks.focal.enabled=true", "tricks.focal.alpha=[0.5,0.5]")
    with pytest.raises(RecipeError, match="binary"):
        build_run("tricks.focal.enabled=true", "tricks.focal.alpha=0.25")
