"""The logit-adjusted loss from a recipe: offsets from the training split's counts, the back-propagated loss
against cross-entropy on the shifted logits (float64), the model's outputs left unshifted, refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trickbag.errors import RecipeError

from . import helpers as h
from .test_class_balanced import _imbalanced_csv

Hook, build_run, record_losses = h.Hook, h.build_run, h.record_losses


def _train_counts(train_set, k):
    return torch.bincount(torch.tensor([int(train_set[i][1]) for i in range(len(train_set))]), minlength=k)


@pytest.mark.parametrize("tau, extra", [(1.0, []), (0.5, ["tricks.label_smoothing.enabled=true"])])
def test_loss_is_cross_entropy_on_logits_shifted_by_the_log_prior(tmp_path, tau, extra):
    losses = []
    trainer, ctx = build_run(*_imbalanced_csv(tmp_path), "tricks.logit_adjust.enabled=true",
                             f"tricks.logit_adjust.tau={tau}", *extra,
                             last=Hook(loss=lambda s: record_losses(s, losses)))
    counts = _train_counts(ctx.data.train, 3).double()
    assert counts[0] > counts[1] > counts[2]
    offsets = tau * torch.log(counts / counts.sum())
    torch.testing.assert_close(ctx.loss_fn.logit_offset.double(), offsets)
    trainer.fit()
    eps = 0.1 if extra else 0.0
    for out, y, _, loss in losses:
        naive = F.cross_entropy(out.double() + offsets, y, label_smoothing=eps)
        torch.testing.assert_close(loss.double(), naive, rtol=1e-5, atol=1e-6)
    # evaluation predicts with the model's own logits: the offsets stay inside the training loss
    val = ctx.data.val
    x = torch.stack([torch.as_tensor(val[i][0]) for i in range(len(val))])
    y = torch.tensor([int(val[i][1]) for i in range(len(val))])
    with torch.no_grad():
        plain = trainer.model.eval()(x).double()
    m = trainer.evaluate(ctx.val_loader)
    assert m["acc"] == pytest.approx(float((plain.argmax(1) == y).double().mean()))
    assert m["loss"] == pytest.approx(float(F.cross_entropy(plain, y)), rel=1e-5)  # the task's plain loss

def test_refusals(tmp_path):
    with pytest.raises(RecipeError, match="tricks.logit_adjust"):
        build_run(*_imbalanced_csv(tmp_path), "tricks.logit_adjust.enabled=true", "tricks.logit_adjust.tau=-1")
    with pytest.raises(RecipeError, match="tricks.logit_adjust needs a training count for each"):
        build_run(*_imbalanced_csv(tmp_path), "tricks.logit_adjust.enabled=true", "model.num_classes=5")
