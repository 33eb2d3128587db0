"""Interaction rules between tricks: what combinations do, and the ones refused in one line."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.errors import ConflictError
from trickbag.models import BUILTIN_MODELS
from trickbag.recipe import load_recipe
from trickbag.train.checkpoint_files import load_checkpoint
from trickbag.train.parts import model_for
from trickbag.tricks import check_interactions

from . import helpers as h
from .helpers import build_tiny, tiny_base

BASE, C, Hook, build_run, record_losses, PLAIN_SGD = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.PLAIN_SGD
TINY2 = tiny_base(epochs=2)  # the weight / model / evaluation interactions: two epochs
UNFREEZE = [
    "tricks.freeze.enabled=true",
    "tricks.freeze.allow_untrained=true",
    "tricks.freeze.patterns=[features.*]",
    "tricks.freeze.unfreeze_epoch=1",
    "tricks.param_groups.enabled=true",
    "tricks.param_groups.lr_scale={'features.*': 0.1}",
]


def _record_before(out):
    return Hook(batch_start=lambda s: out.append((s.batch[0].clone(), s.batch[1].clone())))


def test_sam_with_fp16_trains_from_the_cli(tmp_path, capsys):
    """fp16 SAM on the CPU (float16 autocast, GradScaler("cpu")): it trains; the arithmetic against SAM with a
    GradScaler written by hand, and forced overflows, are in test_sam_fp16.py."""
    from trickbag.cli import main

    code = main(["train", *BASE, "tricks.sam.enabled=true", "train.precision=16", f"run.dir={tmp_path}", "run.name=x",
                 "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "x" / "checkpoints" / "last.pt").is_file()


def test_sam_with_accumulation_matches_a_manual_computation(monkeypatch):
    """SAM written out by hand for a linear model: the closure re-runs every micro-batch of the update
    (the short last one too), and clipping acts on the second-pass gradients the update uses."""
    monkeypatch.setitem(BUILTIN_MODELS, "tiny_linear",
                        lambda shape, k, **kw: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, k)))
    lr, rho, acc, max_norm = 0.5, 0.1, 3, 0.3
    batches = []
    trainer, ctx = build_run("model.name=tiny_linear", *PLAIN_SGD, f"optim.lr={lr}", "tricks.sam.enabled=true",
                             f"tricks.sam.rho={rho}", f"train.accumulate={acc}", "tricks.clip.enabled=true",
                             f"tricks.clip.max_norm={max_norm}", first=_record_before(batches))
    lin = ctx.model[1]
    w, b = lin.weight.detach().double().clone(), lin.bias.detach().double().clone()
    trainer.fit()

    groups = [batches[i:i + acc] for i in range(0, len(batches), acc)]
    assert len(groups) >= 2 and 1 < len(groups[-1]) < acc  # a full group and a short last one

    def grads_at(w, b, group):
        w, b = w.clone().requires_grad_(), b.clone().requires_grad_()
        x, y = torch.cat([x for x, _ in group]), torch.cat([y for _, y in group])  # exact accumulation: the
        loss = F.cross_entropy(x.flatten(1).double() @ w.T + b, y)  # mean over the update's samples
        return torch.autograd.grad(loss, [w, b])

    def norm(gs):
        return math.sqrt(sum(float((g ** 2).sum()) for g in gs))

    clipped = 0
    for group in groups:
        g1 = grads_at(w, b, group)
        e = [rho * g / norm(g1) for g in g1]
        g2 = grads_at(w + e[0], b + e[1], group)
        coef = min(1.0, max_norm / (norm(g2) + 1e-6))
        clipped += coef < 1
        w, b = w - lr * coef * g2[0], b - lr * coef * g2[1]
    assert clipped > 0
    assert trainer.state.step == len(groups)
    torch.testing.assert_close(lin.weight.detach().double(), w, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(lin.bias.detach().double(), b, rtol=1e-4, atol=1e-6)


def test_sam_second_pass_does_not_update_batchnorm_running_stats():
    def bns(model):
        return [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]

    def snap(s):
        return [torch.cat([m.running_mean, m.running_var, m.num_batches_tracked.view(1).float()]).clone()
                for m in bns(s.model)]

    after_first, after_step = [], []
    last = Hook(after_backward=lambda s: None if s.closure_pass else after_first.append(snap(s)),
                step=lambda s: after_step.append(snap(s)))
    trainer, ctx = build_run("tricks.sam.enabled=true", "train.accumulate=2", last=last)
    trainer.fit()
    assert len(after_first) == len(after_step) > 1
    for first, step in zip(after_first, after_step):  # the closure pass ran in between
        assert all(torch.equal(a, b) for a, b in zip(first, step))
    assert not torch.equal(after_step[0][0], after_step[1][0]), "the first pass does update the statistics"
    assert all(int(m.num_batches_tracked) == len(ctx.train_loader) for m in bns(ctx.model))
    assert all(m.momentum == 0.1 for m in bns(ctx.model)), "momentum restored after the run"


def test_label_smoothing_with_mixup_is_folded_into_the_targets_once():
    eps, before, losses = 0.2, [], []
    trainer, ctx = build_run("tricks.mix.enabled=true", "tricks.mix.cutmix_alpha=0", "tricks.mix.mixup_alpha=0.4",
                             "tricks.mix.prob=0.5", "tricks.label_smoothing.enabled=true",
                             f"tricks.label_smoothing.eps={eps}", first=_record_before(before),
                             last=Hook(loss=lambda s: record_losses(s, losses)))
    trainer.fit()
    n_mixed = 0
    for (x0, y0), (out, q, x1, loss) in zip(before, losses):
        mixed, lams = h.mixup_reference(x0, y0, x1)
        n_mixed += bool(lams)
        torch.testing.assert_close(q, ((1 - eps) * mixed + eps / C).float(), rtol=0, atol=1e-5)
        # the loss takes the targets as they are: no second smoothing in the criterion
        torch.testing.assert_close(loss, -(q * torch.log_softmax(out, 1)).sum(1).mean())
    assert 0 < n_mixed < len(losses), "mixed and unmixed batches are both smoothed once"


def test_focal_loss_on_mixed_soft_targets():
    gamma, losses = 2.0, []
    trainer, _ = build_run("tricks.mix.enabled=true", "tricks.focal.enabled=true", f"tricks.focal.gamma={gamma}",
                           last=Hook(loss=lambda s: record_losses(s, losses)))
    trainer.fit()
    assert any(((q > 0) & (q < 1)).any() for _, q, _, _ in losses), "targets are soft"
    for out, q, _, loss in losses:
        torch.testing.assert_close(loss.double(), h.naive_focal(out, q, gamma).mean(), rtol=1e-5, atol=1e-6)




def test_distillation_with_mixup_teacher_sees_mixed_inputs_hard_loss_on_soft_targets(teacher_module):
    import importlib

    T, alpha, before, losses, teacher_inputs = 2.0, 0.6, [], [], []
    trainer, ctx = build_run("tricks.mix.enabled=true", "tricks.distillation.enabled=true",
                             f"tricks.distillation.teacher={teacher_module}:teacher",
                             f"tricks.distillation.alpha={alpha}",
                             f"tricks.distillation.temperature={T}", first=_record_before(before),
                             last=Hook(loss=lambda s: record_losses(s, losses)))
    teacher = next(p.teacher for p in ctx.plugins if hasattr(p, "teacher"))
    teacher.register_forward_pre_hook(lambda m, a: teacher_inputs.append(a[0].clone()))
    reference = importlib.import_module(teacher_module).teacher().eval()
    trainer.fit()
    assert len(teacher_inputs) == len(losses) == len(before)
    for (x0, _), (out, q, x1, loss), tx in zip(before, losses, teacher_inputs):
        assert torch.equal(tx, x1) and not torch.equal(x1, x0), "the teacher sees the mixed batch"
        assert q.is_floating_point()
        with torch.no_grad():
            t = reference(x1)
        hard = -(q.double() * torch.log_softmax(out.double(), 1)).sum(1).mean()
        torch.testing.assert_close(loss.double(), alpha * h.naive_kd(out, t, T) + (1 - alpha) * hard,
                                   rtol=1e-5, atol=1e-6)


def test_distillation_with_sam_and_accumulation_teacher_sees_each_micro_batch(teacher_module):
    student_inputs, teacher_inputs = [], []
    trainer, ctx = build_run("tricks.sam.enabled=true", "train.accumulate=2", "tricks.distillation.enabled=true",
                             f"tricks.distillation.teacher={teacher_module}:teacher")
    teacher = next(p.teacher for p in ctx.plugins if hasattr(p, "teacher"))
    teacher.register_forward_pre_hook(lambda m, a: teacher_inputs.append(a[0].clone()))
    ctx.model.register_forward_pre_hook(
        lambda m, a: student_inputs.append(a[0].clone()) if m.training else None)
    trainer.fit()
    assert len(student_inputs) == 2 * len(ctx.train_loader)  # first pass + closure pass
    assert len(teacher_inputs) == len(student_inputs)
    assert all(torch.equal(a, b) for a, b in zip(teacher_inputs, student_inputs))


def _run(*overrides, hook=None):
    return build_tiny(TINY2, *overrides, hook=hook)


def _train_dir(tmp_path, name, *overrides):
    from trickbag.runs.run import run_recipe

    recipe = load_recipe("digits", [*TINY2, *overrides, f"run.dir={tmp_path}", f"run.name={name}"])
    return run_recipe(recipe, quiet=True)


def _assert_same_tensors(a, b, what):
    assert set(a) == set(b), what
    for k in a:
        assert torch.equal(a[k], b[k]), f"{what}: {k}"


def test_ema_with_swa_is_refused_in_one_line():
    recipe = load_recipe("digits", ["tricks.ema.enabled=true", "tricks.swa.enabled=true"])
    with pytest.raises(ConflictError) as err:
        check_interactions(recipe)
    msg = str(err.value)
    assert "\n" not in msg and "tricks.ema and tricks.swa" in msg and "enable only one" in msg


def test_ema_resume_continues_identically(tmp_path):
    from trickbag.runs.run import resume_run

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


def test_unfreeze_adds_the_params_back_with_the_scheduled_lr_of_their_group():
    lrs, end0 = [], {}

    def batch_start(s):
        lrs.append(
            (s.epoch, {id(p): (g["lr"], g["weight_decay"]) for g in s.optimizer.param_groups for p in g["params"]})
        )

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
    from trickbag.runs.run import resume_run

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


def test_feature_distillation_under_ddp_is_refused_before_anything_is_built():
    recipe = load_recipe("digits", ["tricks.distillation.enabled=true", "tricks.distillation.teacher=some.module:net",
                                    "tricks.distillation.features=[features=features]", "dist.nproc=2"])
    with pytest.raises(ConflictError, match="distillation.features is not supported with several processes"):
        check_interactions(recipe)
    alone = load_recipe("digits", ["tricks.distillation.enabled=true", "tricks.distillation.teacher=some.module:net",
                                   "tricks.distillation.features=[features=features]"])
    check_interactions(alone)  # one process: accepted


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
    for rec in state.history:
        assert rec["lr/group0"] == pytest.approx(ref_opt.param_groups[0]["lr"])  # LR used during that epoch
        ref.step(rec["val/loss"])
    assert state.lrs()[0] == pytest.approx(ref_opt.param_groups[0]["lr"])


def test_early_stopping_follows_the_ema_metrics():
    # decay 1: the EMA (weights and averaged BN statistics) stays at the initial weights, so its val/loss
    # never improves, while the raw weights do: early stopping must stop on the EMA's metric
    trainer, ctx, recipe = _run("tricks.ema.enabled=true", "tricks.ema.decay=1.0", "tricks.ema.warmup=false",
                                "tricks.ema.buffers=average", "train.epochs=6", "train.early_stopping_patience=1",
                                "train.monitor=val/loss", "train.mode=min")
    initial = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    state = trainer.fit()
    assert len(state.history) == 2 and "early stopping" in (state.stop_message or "")
    h0, h1 = state.history
    assert h1["val/loss_raw"] < h0["val/loss_raw"]  # the raw weights improved: they were not what was watched
    model = model_for(recipe, ctx.data)
    model.load_state_dict(initial)
    model.eval()
    x = torch.stack([ctx.data.val[i][0] for i in range(len(ctx.data.val))])
    y = torch.stack([torch.as_tensor(ctx.data.val[i][1]) for i in range(len(ctx.data.val))])
    with torch.no_grad():
        loss = float(F.cross_entropy(model(x).double(), y))
    assert h0["val/loss"] == pytest.approx(loss, rel=1e-5) and h1["val/loss"] == pytest.approx(loss, rel=1e-5)


def test_compiled_model_checkpoints_have_plain_keys(tmp_path):
    from trickbag.train.plugins.checkpoints import Checkpointing

    trainer, ctx, recipe = _run("tricks.compile.enabled=true", "tricks.compile.backend=eager",
                                "tricks.ema.enabled=true", "train.epochs=1")
    assert isinstance(trainer.model, torch._dynamo.eval_frame.OptimizedModule)
    trainer.add_plugin(Checkpointing(tmp_path))
    trainer.fit()
    plain = model_for(recipe, ctx.data)
    ckpt = load_checkpoint(tmp_path / "last.pt")
    for key in ("model", "eval_model"):
        assert set(ckpt[key]) == set(plain.state_dict()), key  # no '_orig_mod.' prefix anywhere
        assert not any("_orig_mod" in k for k in ckpt[key])
    assert not any("_orig_mod" in k for k in ckpt["plugins"]["ema"]["module"])
    plain.load_state_dict(ckpt["eval_model"])  # strict load into the uncompiled model
    x = torch.randn(4, *ctx.data.input_shape)
    with torch.no_grad():
        torch.testing.assert_close(plain.eval()(x), trainer.model.eval()(x))
