"""Flip TTA from a recipe."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trickbag.nn import flip_tta

from .helpers import tiny_run


def test_tta_evaluation_averages_flipped_predictions():
    trainer, ctx, _ = tiny_run("tricks.tta.enabled=true")
    state = trainer.fit()
    assert state.predict is None  # TTA is removed after each evaluation
    val = ctx.data.val
    x = torch.stack([val[i][0] for i in range(len(val))])
    y = torch.stack([torch.as_tensor(val[i][1]) for i in range(len(val))])
    model = trainer.model.eval()
    with torch.no_grad():
        tta = flip_tta(model, x, hflip=True, vflip=False, average="probs").double()  # checked in tests/nn
        plain = model(x).double()
    m = state.history[-1]
    assert m["val/loss"] == pytest.approx(float(F.cross_entropy(tta, y)), rel=1e-5)
    assert m["val/acc"] == pytest.approx(float((tta.argmax(1) == y).double().mean()))
    assert m["val/loss"] != pytest.approx(float(F.cross_entropy(plain, y)), rel=1e-4)  # it did act
    # a later evaluation (the run's test) uses it too
    again = trainer.evaluate(ctx.val_loader)
    assert again["loss"] == pytest.approx(m["val/loss"], rel=1e-6)
