"""Interaction rules of the weight / model / evaluation tricks: each test fails if its rule is broken.

EMA + SWA (refused), EMA + resume, EMA + BN buffers (see test_weights.py), freeze + optimizer param
groups and unfreeze (with the scheduled LR, and across a resume), accumulation + plateau scheduler,
early stopping on EMA metrics, torch.compile + checkpoint keys, unfreeze + DDP (refused).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.config import load_recipe
from trickbag.errors import ConflictError
from trickbag.models import build_model
from trickbag.train.checkpoint import load_checkpoint

from _tiny import Hook, build_run, tiny_base
from trickbag.train.tricks import check_interactions

BASE = tiny_base(epochs=2)
UNFREEZE = ["tricks.freeze.enabled=true", "tricks.freeze.patterns=[features.*]", "tricks.freeze.unfreeze_epoch=1",
            "tricks.param_groups.enabled=true", "tricks.param_groups.lr_scale={'features.*': 0.1}"]


def _run(*overrides, hook=None):
    return build_run(BASE, *overrides, hook=hook)


def _train_dir(tmp_path, name, *overrides):
    from trickbag.train.run import train_recipe

    recipe = load_recipe("digits", [*BASE, *overrides, f"run.dir={tmp_path}", f"run.name={name}"])
    return train_recipe(recipe, quiet=True)


def _assert_same_tensors(a, b, what):
    assert set(a) == set(b), what
    for k in a:
        assert torch.equal(a[k], b[k]), f"{what}: {k}"


# --------------------------------------------------------------------------- EMA + SWA
def test_ema_with_swa_is_refused_in_one_line():
    recipe = load_recipe("digits", ["tricks.ema.enabled=true", "tricks.swa.enabled=true"])
    with pytest.raises(ConflictError) as err:
        check_interactions(recipe)
    msg = str(err.value)
    assert "\n" not in msg and "tricks.ema and tricks.swa" in msg and "enable only one" in msg


# --------------------------------------------------------------------------- EMA + resume
def test_ema_resume_continues_identically(tmp_path):
    from trickbag.train.run import resume_run

    ema = ["tricks.ema.enabled=true", "tricks.ema.decay=0.7", "schedule.name=constant"]
    straight = _train_dir(tmp_path, "straight", *ema, "train.epochs=2")
    staged = _train_dir(tmp_path, "staged", *ema, "train.epochs=1")
    staged = resume_run(staged.run_dir, ["train.epochs=2"], quiet=True)
    a = load_checkpoint(straight.run_dir / "checkpoints" / "last.pt")
    b = load_checkpoint(staged.run_dir / "checkpoints" / "last.pt")
    assert a["plugins"]["ema"]["num_updates"] == b["plugins"]["ema"]["num_updates"] > 0
    _assert_same_tensors(a["plugins"]["ema"]["module"], b["plugins"]["ema"]["module"], "EMA weights")
    _assert_same_tensors(a["eval_model"], b["eval_model"], "eval_model")
    _assert_same_tensors(a["model"], b["model"], "raw weights")
    assert [h["val/acc"] for h in straight.history] == [h["val/acc"] for h in staged.history]
    assert [h["val/loss"] for h in straight.history] == [h["val/loss"] for h in staged.history]


# --------------------------------------------------------------------------- freeze + param groups + unfreeze
def test_unfreeze_adds_the_params_back_with_the_scheduled_lr_of_their_group():
    lrs, end0 = [], {}

    def batch_start(s):
        lrs.append((s.epoch, {id(p): (g["lr"], g["weight_decay"]) for g in s.optimizer.param_groups for p in g["params"]}))

    def epoch_end(s):
        if s.epoch == 0:
            end0.update({n: p.detach().clone() for n, p in s.model.named_parameters()})

    trainer, ctx, recipe = _run(*UNFREEZE, "optim.weight_decay=0.01", hook=Hook(batch_start=batch_start,
                                                                               epoch_end=epoch_end))
    model = trainer.model
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    features = {id(p): n for n, p in model.named_parameters() if n.startswith("features.")}
    norm = {id(p) for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d) for p in m.parameters()}
    n_groups = len(trainer.optimizer.param_groups)
    state = trainer.fit()
    total = state.step
    for t, (epoch, groups) in enumerate(lrs):
        cosine = (1 + math.cos(math.pi * t / total)) / 2  # the recipe's schedule at update t
        if epoch == 0:
            assert not set(features) & set(groups)  # frozen params are not in the optimizer
        else:
            assert set(features) <= set(groups)
        for pid, (lr, wd) in groups.items():
            scale = 0.1 if pid in features else 1.0
            assert lr == pytest.approx(0.1 * scale * cosine, rel=1e-6), (t, features.get(pid, "head"))
            if pid in features:  # the no-decay rule holds for the added groups too
                p = next(p for p in model.parameters() if id(p) == pid)
                assert wd == (0.0 if p.ndim <= 1 or pid in norm else 0.01), features[pid]
    assert len(trainer.optimizer.param_groups) > n_groups
    for n in start:
        if n.startswith("features."):
            assert torch.equal(end0[n], start[n]), n  # frozen during epoch 0
            assert not torch.equal(model.state_dict()[n], end0[n]), n  # trained after the unfreeze


def test_unfreeze_resume_continues_identically(tmp_path):
    from trickbag.train.run import resume_run

    common = [*UNFREEZE, "schedule.name=constant"]
    straight = _train_dir(tmp_path, "straight", *common, "train.epochs=3")
    staged = _train_dir(tmp_path, "staged", *common, "train.epochs=2")  # last.pt is after the unfreeze
    assert load_checkpoint(staged.run_dir / "checkpoints" / "last.pt")["plugins"]["freeze"]["unfrozen"]
    staged = resume_run(staged.run_dir, ["train.epochs=3"], quiet=True)
    a = load_checkpoint(straight.run_dir / "checkpoints" / "last.pt")
    b = load_checkpoint(staged.run_dir / "checkpoints" / "last.pt")
    _assert_same_tensors(a["model"], b["model"], "weights")
    assert [g["lr"] for g in a["optimizer"]["param_groups"]] == [g["lr"] for g in b["optimizer"]["param_groups"]]
    assert [h["train/loss"] for h in straight.history] == [h["train/loss"] for h in staged.history]


def test_unfreeze_under_ddp_is_refused():
    recipe = load_recipe("digits", [*UNFREEZE, "dist.nproc=2"])
    with pytest.raises(ConflictError, match="unfreeze_epoch cannot be used with dist.nproc > 1"):
        check_interactions(recipe)


# --------------------------------------------------------------------------- accumulation + plateau
def test_plateau_is_stepped_once_per_evaluation_with_accumulation():
    trainer, ctx, recipe = _run("schedule.name=plateau", "schedule.patience=0", "schedule.gamma=0.5",
                                "train.accumulate=2", "train.epochs=3", "train.monitor=val/loss", "train.mode=min")
    sched = trainer.state.scheduler
    assert isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau)
    calls = []
    original = sched.step
    sched.step = lambda *a, **k: (calls.append(a), original(*a, **k))[1]
    state = trainer.fit()
    assert state.step == 3 * math.ceil(len(ctx.train_loader) / 2) > 3  # several updates per epoch ...
    assert [a[0] for a in calls] == [h["val/loss"] for h in state.history]  # ... one plateau step per evaluation
    # reference: torch's ReduceLROnPlateau fed the same values gives the same LRs
    ref_opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=recipe.optim.lr)
    ref = torch.optim.lr_scheduler.ReduceLROnPlateau(ref_opt, mode="min", factor=0.5, patience=0)
    for h in state.history:
        assert h["lr/group0"] == pytest.approx(ref_opt.param_groups[0]["lr"])  # LR used during that epoch
        ref.step(h["val/loss"])
    assert state.lrs()[0] == pytest.approx(ref_opt.param_groups[0]["lr"])


# --------------------------------------------------------------------------- early stopping on EMA metrics
def test_early_stopping_follows_the_ema_metrics():
    # decay 1: the EMA (weights and averaged BN statistics) stays at the initial weights, so its val/loss
    # never improves, while the raw weights do: early stopping must stop on the EMA's metric
    trainer, ctx, recipe = _run("tricks.ema.enabled=true", "tricks.ema.decay=1.0", "tricks.ema.warmup=false",
                                "tricks.ema.buffers=average", "train.epochs=6", "train.early_stopping_patience=1",
                                "train.monitor=val/loss", "train.mode=min")
    initial = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    state = trainer.fit()
    assert len(state.history) == 2 and "early stopping" in (state.stop_reason or "")
    h0, h1 = state.history
    assert h1["val/loss_raw"] < h0["val/loss_raw"]  # the raw weights improved: they were not what was watched
    model = build_model(recipe.model.name, ctx.data.input_shape, ctx.data.num_classes, **recipe.model.kwargs)
    model.load_state_dict(initial)
    model.eval()
    x = torch.stack([ctx.data.val[i][0] for i in range(len(ctx.data.val))])
    y = torch.stack([torch.as_tensor(ctx.data.val[i][1]) for i in range(len(ctx.data.val))])
    with torch.no_grad():
        loss = float(F.cross_entropy(model(x).double(), y))
    assert h0["val/loss"] == pytest.approx(loss, rel=1e-5) and h1["val/loss"] == pytest.approx(loss, rel=1e-5)


# --------------------------------------------------------------------------- torch.compile + checkpoint keys
def test_compiled_model_checkpoints_have_plain_keys(tmp_path):
    from trickbag.train.builtin import Checkpointing

    trainer, ctx, recipe = _run("tricks.compile.enabled=true", "tricks.compile.backend=eager",
                                "tricks.ema.enabled=true", "train.epochs=1")
    assert isinstance(trainer.model, torch._dynamo.eval_frame.OptimizedModule)
    trainer.add_plugin(Checkpointing(tmp_path))
    trainer.fit()
    plain = build_model(recipe.model.name, ctx.data.input_shape, ctx.data.num_classes, **recipe.model.kwargs)
    ckpt = load_checkpoint(tmp_path / "last.pt")
    for key in ("model", "eval_model"):
        assert set(ckpt[key]) == set(plain.state_dict()), key  # no '_orig_mod.' prefix anywhere
        assert not any("_orig_mod" in k for k in ckpt[key])
    assert not any("_orig_mod" in k for k in ckpt["plugins"]["ema"]["module"])
    plain.load_state_dict(ckpt["eval_model"])  # strict load into the uncompiled model
    x = torch.randn(4, *ctx.data.input_shape)
    with torch.no_grad():
        torch.testing.assert_close(plain.eval()(x), trainer.model.eval()(x))
