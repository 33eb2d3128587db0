"""Flip TTA from a recipe."""

from __future__ import annotations
import json
import struct
import pytest
import torch
import torch.nn.functional as F
from trickbag.recipe import load_recipe
from trickbag.train.build import build
from trickbag.nn import flip_tta

BASE = [
    "data.name=fake", "data.num_samples=96", "data.batch_size=16", "train.epochs=1", "train.device=cpu",
    "log.tensorboard=false", "run.progress=false", "run.plots=false", "schedule.warmup_epochs=0",
    "model.kwargs={width: 8}", "optim.lr=0.1",
]


def _naive_tta(model, x, flips, average):
    views = [x] + [torch.flip(x, dims=(d,)) for d in flips]
    outs = [model(v).double() for v in views]
    if average == "logits":
        return sum(outs) / len(outs)
    return torch.log(sum(torch.softmax(o, 1) for o in outs) / len(outs))


@pytest.mark.parametrize("average", ["probs", "logits"])
def test_flip_tta_matches_a_naive_average(average):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 5, 6))
    x = torch.randn(7, 3, 4, 5)
    got = flip_tta(model, x, hflip=True, vflip=True, average=average)
    torch.testing.assert_close(got.double(), _naive_tta(model, x, (-1, -2), average), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"vflip needs image batches \[N, C, H, W\]"):
        flip_tta(model, torch.randn(2, 3, 5), vflip=True)


def test_tta_evaluation_averages_flipped_predictions():
    recipe = load_recipe("digits", [*BASE, "tricks.tta.enabled=true"])
    trainer, ctx = build(recipe)
    state = trainer.fit()
    assert state.predict is None  # TTA is removed after each evaluation
    val = ctx.data.val
    x = torch.stack([val[i][0] for i in range(len(val))])
    y = torch.stack([torch.as_tensor(val[i][1]) for i in range(len(val))])
    model = trainer.model.eval()
    with torch.no_grad():
        tta = _naive_tta(model, x, (-1,), "probs")
        plain = model(x).double()
    m = state.history[-1]
    assert m["val/loss"] == pytest.approx(float(F.cross_entropy(tta, y)), rel=1e-5)
    assert m["val/acc"] == pytest.approx(float((tta.argmax(1) == y).double().mean()))
    assert m["val/loss"] != pytest.approx(float(F.cross_entropy(plain, y)), rel=1e-4)  # it did act
    # a later evaluation (the run's test) uses it too
    again = trainer.evaluate(ctx.val_loader)
    assert again["loss"] == pytest.approx(m["val/loss"], rel=1e-6)
