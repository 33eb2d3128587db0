"""Label smoothing from a recipe: cross-entropy on smoothed targets, applied once with mixup."""

from __future__ import annotations

import torch

from . import helpers as h

BASE, C, Hook, build_run, record_losses, onehot = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.onehot


def test_label_smoothing_loss_is_cross_entropy_on_smoothed_targets():
    eps, losses = 0.2, []
    trainer, _ = build_run("tricks.label_smoothing.enabled=true", f"tricks.label_smoothing.eps={eps}",
                           last=Hook(loss=lambda s: record_losses(s, losses)))
    trainer.fit()
    assert losses
    for out, y, _, loss in losses:
        q = (1 - eps) * onehot(y) + eps / C
        torch.testing.assert_close(loss, -(q * torch.log_softmax(out, 1)).sum(1).mean())
