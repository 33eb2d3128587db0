"""Distillation from a recipe: function and checkpoint teachers, refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trickbag.errors import ConflictError, RecipeError
from trickbag.recipe import load_recipe

from . import helpers as h

BASE, C, Hook, build_run, record_losses, onehot = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.onehot




def test_distillation_from_a_function_teacher(teacher_module):
    import importlib

    T, alpha, losses, teacher_inputs = 3.0, 0.7, [], []
    reference = importlib.import_module(teacher_module).teacher().eval()
    trainer, ctx = build_run("tricks.distillation.enabled=true",
                             f"tricks.distillation.teacher={teacher_module}:teacher",
                             f"tricks.distillation.temperature={T}", f"tricks.distillation.alpha={alpha}",
                             last=Hook(loss=lambda s: record_losses(s, losses)))
    teacher = ctx.plugins[0].teacher
    teacher.register_forward_pre_hook(lambda m, a: teacher_inputs.append(a[0].clone()))
    trainer.fit()
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())
    for p, q in zip(teacher.parameters(), reference.parameters()):
        assert torch.equal(p, q), "the teacher is not trained"
    assert len(teacher_inputs) == len(losses)
    for (out, y, x, loss), tx in zip(losses, teacher_inputs):
        assert torch.equal(tx, x)
        with torch.no_grad():
            t = reference(x)  # eval mode: dropout off
        expected = alpha * h.naive_kd(out, t, T) + (1 - alpha) * F.cross_entropy(out.double(), y)
        torch.testing.assert_close(loss.double(), expected, rtol=1e-5, atol=1e-6)


def test_distillation_from_a_run_checkpoint(tmp_path):
    from trickbag.runs.run import run_recipe
    from trickbag.train.checkpoint import load_checkpoint

    teacher_run = load_recipe("digits", [*BASE, f"run.dir={tmp_path}", "run.name=teacher", "model.kwargs={width: 8}"])
    run_recipe(teacher_run, quiet=True)
    ckpt = tmp_path / "teacher" / "checkpoints" / "best.pt"
    trainer, ctx = build_run("tricks.distillation.enabled=true", f"tricks.distillation.teacher={ckpt}")
    teacher = ctx.plugins[0].teacher
    saved = load_checkpoint(ckpt)["model"]
    assert set(teacher.state_dict()) == set(saved)
    for k, v in teacher.state_dict().items():
        assert torch.equal(v, saved[k])
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    trainer.fit()
    assert all(torch.equal(v, before[k]) for k, v in teacher.state_dict().items()), "BN stats and weights untouched"


def test_distillation_refusals(teacher_module, tmp_path):
    with pytest.raises(ConflictError, match=r"predicts \[5\] outputs but the student has 4 classes"):
        build_run("tricks.distillation.enabled=true", f"tricks.distillation.teacher={teacher_module}:wrong_classes")
    with pytest.raises(RecipeError, match="not a torch.nn.Module"):
        build_run("tricks.distillation.enabled=true", f"tricks.distillation.teacher={teacher_module}:not_a_module")
    with pytest.raises(RecipeError, match="teacher is not set"):
        build_run("tricks.distillation.enabled=true")
    with pytest.raises(RecipeError, match="does not exist"):
        build_run("tricks.distillation.enabled=true", f"tricks.distillation.teacher={tmp_path / 'nope.pt'}")
