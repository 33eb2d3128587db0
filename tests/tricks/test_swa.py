"""SWA from a recipe: LR, average, BN statistics, evaluation and resume."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader

from trickbag.recipe import load_recipe
from trickbag.tricks.swa import SWAPlugin

from .helpers import Hook, fresh_model, naive_eval, plugin_of, snapshot, tiny_base, tiny_run

BASE = tiny_base(epochs=2)


def test_swa_lr_average_bn_statistics_and_evaluation():
    lrs, ends = [], []
    hook = Hook(
        batch_start=lambda s: lrs.append((s.epoch, s.lrs()[0])),
        epoch_end=lambda s: ends.append((s.epoch, snapshot(s.model), dict(s.metrics))),
    )
    trainer, ctx, recipe = tiny_run("tricks.swa.enabled=true", "tricks.swa.start_epoch=1", "tricks.swa.anneal_epochs=0",
                                    "tricks.swa.lr_factor=0.5", "train.epochs=3", "data.eval_batch_size=128", hook=hook,
                                    epochs=2)
    swa = plugin_of(trainer, SWAPlugin)
    state = trainer.fit()

    base, total = recipe.optim.lr, state.step
    for t, (epoch, lr) in enumerate(lrs):
        if epoch == 0:  # the recipe's cosine schedule
            assert lr == pytest.approx(base * (1 + math.cos(math.pi * t / total)) / 2, rel=1e-6)
        else:  # SWALR, no annealing: lr_factor x base LR
            assert lr == pytest.approx(0.5 * base, rel=1e-9)
    # the average of the weights at the end of epochs 1 and 2 (not of epoch 0)
    assert int(swa.swa.n_averaged) == 2
    averaged = swa.swa.module.state_dict()
    params = [n for n, _ in swa.swa.module.named_parameters()]
    for name in params:
        expected = (ends[1][1][name].double() + ends[2][1][name].double()) / 2
        torch.testing.assert_close(averaged[name].double(), expected, rtol=1e-5, atol=1e-6)
    # BatchNorm statistics recomputed for the averaged weights on the un-augmented training data
    ref = fresh_model(recipe, ctx, ends[2][1])
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.copy_(averaged[name])
    torch.optim.swa_utils.update_bn(DataLoader(ctx.data.eval_train, batch_size=len(ctx.data.eval_train)), ref)
    for name, buf in ref.named_buffers():
        if "running" in name:
            torch.testing.assert_close(averaged[name], buf, rtol=1e-4, atol=1e-5, msg=name)
    # the SWA phase's evaluation used the averaged weights; raw ones reported as *_raw
    last = ends[2][2]
    loss, acc = naive_eval(fresh_model(recipe, ctx, averaged), ctx.data.val)
    assert last["val/loss"] == pytest.approx(loss, rel=1e-4) and last["val/acc"] == pytest.approx(acc)
    loss_raw, _ = naive_eval(fresh_model(recipe, ctx, ends[2][1]), ctx.data.val)
    assert last["val/loss_raw"] == pytest.approx(loss_raw, rel=1e-5)
    assert "val/loss_raw" not in ends[0][2]  # before the SWA phase: the raw weights only
    # after fit the model holds the averaged weights
    for k, v in trainer.model.state_dict().items():
        torch.testing.assert_close(v, averaged[k], msg=k)


def test_swa_resume_in_the_averaging_phase_continues_identically(tmp_path):
    from trickbag.runs.run import resume_run, run_recipe
    from trickbag.train.checkpoint_files import load_checkpoint

    common = [*BASE, "schedule.name=constant", "tricks.swa.enabled=true", "tricks.swa.start_epoch=1",
              "tricks.swa.anneal_epochs=1", f"run.dir={tmp_path}"]
    straight = run_recipe(load_recipe("digits", [*common, "train.epochs=3", "run.name=a"]), quiet=True)
    staged = run_recipe(load_recipe("digits", [*common, "train.epochs=2", "run.name=b"]), quiet=True)
    staged = resume_run(staged.run_dir, ["train.epochs=3"], quiet=True)  # resumes inside the SWA phase
    a, b = (load_checkpoint(r.run_dir / "checkpoints" / "last.pt") for r in (straight, staged))
    for key in ("model", "eval_model"):
        assert set(a[key]) == set(b[key])
        assert all(torch.equal(a[key][k], b[key][k]) for k in a[key]), key
    assert [h["lr/group0"] for h in staged.history] == [h["lr/group0"] for h in straight.history]
    assert [h["val/loss"] for h in staged.history] == [h["val/loss"] for h in straight.history]
