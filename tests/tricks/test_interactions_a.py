"""Interaction rules of the batch / loss / optimizer tricks: each test fails if its rule is broken."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.errors import ConflictError
from trickbag.models import BUILTIN_MODELS


import helpers_a as h  # noqa: E402 (tests/tricks is on sys.path under pytest)
BASE, C, Hook, build_run, record_losses, PLAIN_SGD = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.PLAIN_SGD


def _record_before(out):
    return Hook(batch_start=lambda s: out.append((s.batch[0].clone(), s.batch[1].clone())))


# --------------------------------------------------------------------------- SAM + fp16
def test_sam_with_fp16_is_refused_naming_bf16():
    with pytest.raises(ConflictError, match=r"train.precision=16.*use train.precision=bf16"):
        build_run("tricks.sam.enabled=true", "train.precision=16")


def test_sam_with_fp16_cli_one_line_exit_2_nothing_written(tmp_path, capsys):
    from trickbag.cli import main

    code = main(["train", *BASE, "tricks.sam.enabled=true", "train.precision=16", f"run.dir={tmp_path}", "run.name=x"])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "bf16" in lines[0] and "tricks.sam" in lines[0]
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- SAM + accumulation (+ clipping)
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
        loss = sum(F.cross_entropy(x.flatten(1).double() @ w.T + b, y) for x, y in group) / len(group)
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


# --------------------------------------------------------------------------- SAM + BatchNorm
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


# --------------------------------------------------------------------------- mix + smoothing / focal / distillation
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


@pytest.fixture
def teacher_module(tmp_path, monkeypatch):
    return h.write_teacher_module(tmp_path, monkeypatch)


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
