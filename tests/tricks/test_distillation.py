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
    from trickbag.train.checkpoint_files import load_checkpoint

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


FEATURE_TEACHER = '''
import torch

def conv_teacher():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(6 * 64, 4))
'''


def test_feature_distillation_adds_the_projected_feature_error_and_trains_the_projection(tmp_path, monkeypatch):
    """FitNets: loss = alpha KD + (1 - alpha) CE + w * MSE(P(student conv), teacher conv), P a learned 1x1 conv;
    the reference is that formula computed here, at the first update, from the initial weights."""
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.plugin.interface import Plugin
    from trickbag.train.trainer import Trainer

    (tmp_path / "tb_feature_teacher.py").write_text(FEATURE_TEACHER)
    monkeypatch.syspath_prepend(str(tmp_path))
    torch.manual_seed(0)
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 4, (16,))
    student = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                  torch.nn.Linear(4 * 64, 4))
    conv_w, conv_b = student[0].weight.detach().clone(), student[0].bias.detach().clone()
    T, alpha, w, seen = 2.0, 0.3, 0.5, []

    class Record(Plugin):
        def on_loss(self, state):
            seen.append((state.batch[0].clone(), state.batch[1].clone(), state.output.detach().clone(),
                         state.loss.detach().clone()))

    t = Trainer(student, torch.optim.SGD(student.parameters(), lr=0.1), DataLoader(TensorDataset(x, y), batch_size=8),
                device="cpu", progress=False, plugins=[Record()], seed=3,
                tricks={"distillation": {"teacher": "tb_feature_teacher:conv_teacher", "temperature": T,
                                         "alpha": alpha, "features": ["0=0"], "feature_weight": w}})
    dist = next(p for p in t.plugins if p.name == "distillation")
    proj = dist.projections[0].weight.detach().clone()
    assert tuple(proj.shape) == (6, 4, 1, 1)
    t.fit()
    xb, yb, out, loss = seen[0]
    with torch.no_grad():
        t_feat, t_out = dist.teacher[0](xb), dist.teacher(xb)
        s_feat = F.conv2d(xb, conv_w, conv_b, padding=1)  # the student's first layer at its initial weights
        feat = F.mse_loss(F.conv2d(s_feat, proj), t_feat)
    expected = alpha * h.naive_kd(out, t_out, T) + (1 - alpha) * F.cross_entropy(out.double(), yb) + w * feat.double()
    torch.testing.assert_close(loss.double(), expected, rtol=1e-5, atol=1e-6)
    assert not torch.equal(proj, dist.projections[0].weight)  # the projection is trained with the student
    assert set(t.state_dict()["plugins"]["distillation"]["projections"]) == {"0.weight"}


def test_feature_pairs_that_cannot_be_matched_are_refused_in_one_line(tmp_path, monkeypatch):
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.train.trainer import Trainer

    (tmp_path / "tb_feature_teacher.py").write_text(FEATURE_TEACHER)
    monkeypatch.syspath_prepend(str(tmp_path))
    student = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                  torch.nn.Linear(4 * 36, 4))
    loader = DataLoader(TensorDataset(torch.randn(8, 1, 8, 8), torch.randint(0, 4, (8,))), batch_size=4)
    for features, words in ((["9=0"], "the student has no module '9'"), (["0=0"], "same spatial size"),
                            (["0"], "is not 'student_module=teacher_module'")):
        with pytest.raises(RecipeError, match=words) as err:
            Trainer(student, torch.optim.SGD(student.parameters(), lr=0.1), loader, device="cpu",
                    tricks={"distillation": {"teacher": "tb_feature_teacher:conv_teacher", "features": features}})
        assert "\n" not in str(err.value)
