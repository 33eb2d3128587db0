"""L1 penalty from a recipe."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import helpers as h

BASE, C, Hook, build_run, record_losses, onehot = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.onehot


def test_l1_penalty_added_to_the_loss():
    lam, losses, params = 1e-3, [], []

    def rec(s):
        record_losses(s, losses)
        params.append(sum(p.detach().abs().sum() for p in s.model.parameters() if p.requires_grad))

    trainer, _ = build_run("tricks.l1.enabled=true", f"tricks.l1.weight={lam}", last=Hook(loss=rec))
    trainer.fit()
    for (out, y, _, loss), l1 in zip(losses, params):
        torch.testing.assert_close(loss, F.cross_entropy(out, y) + lam * l1, rtol=1e-5, atol=1e-6)
