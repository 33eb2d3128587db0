"""Gradient-norm logging from a recipe."""

from __future__ import annotations

import csv

import pytest

from trickbag.recipe import load_recipe

from .helpers import BASE, Hook, build_run, grads_of, naive_norm


def test_grad_norm_per_update_and_epoch_mean():
    norms = []

    def rec(s):
        norms.append(float(s.grad_norm))
        assert float(s.grad_norm) == pytest.approx(naive_norm(grads_of(s)), rel=1e-5)

    trainer, _ = build_run("tricks.grad_norm.enabled=true", "train.epochs=2", last=Hook(after_backward=rec))
    state = trainer.fit()
    per_epoch = len(norms) // 2
    assert per_epoch == state.step // 2 > 1
    for e, row in enumerate(state.history):
        chunk = norms[e * per_epoch:(e + 1) * per_epoch]
        assert row["train/grad_norm"] == pytest.approx(sum(chunk) / len(chunk), rel=1e-6)
        assert row["train/grad_norm_max"] == pytest.approx(max(chunk), rel=1e-6)


def test_grad_norm_in_metrics_csv_step_rows(tmp_path):
    from trickbag.runs.run import run_recipe

    recipe = load_recipe("digits", [*BASE, "tricks.grad_norm.enabled=true", "log.every_steps=1",
                                    f"run.dir={tmp_path}", "run.name=r"])
    run_recipe(recipe, quiet=True)
    rows = list(csv.DictReader(open(tmp_path / "r" / "metrics.csv")))
    steps = [float(r["train/grad_norm"]) for r in rows if r.get("train/step_loss")]
    epoch = [r for r in rows if r.get("train/loss")]
    assert len(steps) > 1 and all(v > 0 for v in steps)
    assert float(epoch[-1]["train/grad_norm"]) == pytest.approx(sum(steps) / len(steps), rel=1e-4)
