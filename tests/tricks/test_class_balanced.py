"""Class-balanced weights from a recipe: from the training split's counts."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from . import helpers as h

BASE, C, Hook, build_run, record_losses, onehot = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.onehot


def _imbalanced_csv(tmp_path):
    g = torch.Generator().manual_seed(0)
    counts = [60, 25, 10]
    lines = ["a,b,c,label"]
    for k, n in enumerate(counts):
        for _ in range(n):
            v = (torch.randn(3, generator=g) + 2 * k).tolist()
            lines.append(",".join(f"{t:.5f}" for t in v) + f",{k}")
    path = tmp_path / "imb.csv"
    path.write_text("\n".join(lines) + "\n")
    return ["data.name=csv", f"data.root={path}", "model.name=mlp", "model.kwargs={hidden: [8]}"]


def _cb_weights(train_set, beta, k):
    counts = torch.bincount(torch.tensor([int(train_set[i][1]) for i in range(len(train_set))]), minlength=k)
    eff = (1 - beta ** counts.double()) / (1 - beta)
    w = 1 / eff
    return w * k / w.sum(), counts


@pytest.mark.parametrize("focal", [False, True])
def test_class_balanced_weights_from_training_counts(tmp_path, focal):
    beta, losses = 0.99, []
    extra = ["tricks.focal.enabled=true", "tricks.focal.gamma=1.5"] if focal else []
    trainer, ctx = build_run(*_imbalanced_csv(tmp_path), "tricks.class_balanced.enabled=true",
                             f"tricks.class_balanced.beta={beta}", *extra,
                             last=Hook(loss=lambda s: record_losses(s, losses)))
    w, counts = _cb_weights(ctx.data.train, beta, 3)
    assert counts[0] > counts[1] > counts[2]  # imbalanced, so the weights are not all 1
    torch.testing.assert_close(ctx.loss_fn.weight.double(), w)
    trainer.fit()
    for out, y, _, loss in losses:
        if focal:  # weighted mean: sum_n w_y (1 - p_y)^g (-log p_y) / sum_n w_y
            naive = (h.naive_focal(out, onehot(y, 3), 1.5) * w[y]).sum() / w[y].sum()
        else:
            naive = F.cross_entropy(out.double(), y, weight=w)
        torch.testing.assert_close(loss.double(), naive, rtol=1e-5, atol=1e-6)
