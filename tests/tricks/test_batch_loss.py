"""Batch and loss tricks from a recipe: each trains a tiny run and is checked against a reference written here."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from trickbag.config import load_recipe
from trickbag.errors import ConflictError, RecipeError


import helpers_a as h  # noqa: E402 (tests/tricks is on sys.path under pytest)
BASE, C, Hook, build_run, record_losses, onehot = h.BASE, h.C, h.Hook, h.build_run, h.record_losses, h.onehot


def batches_around(*overrides):
    """Train one epoch; return [(x_before, y_before, x_after, y_after, model_input)] per batch."""
    before, after, seen = [], [], []
    first = Hook(batch_start=lambda s: before.append((s.batch[0].clone(), s.batch[1].clone())))
    last = Hook(batch_start=lambda s: after.append((s.batch[0].clone(), s.batch[1].clone())))
    trainer, ctx = build_run(*overrides, first=first, last=last)
    handle = trainer.model.register_forward_pre_hook(lambda m, a: seen.append(a[0].clone()) if m.training else None)
    state = trainer.fit()
    handle.remove()
    assert len(before) == len(after) == len(seen) == len(ctx.train_loader) > 1
    assert all(math.isfinite(row["train/loss"]) for row in state.history)
    return [(*b, *a, s) for b, a, s in zip(before, after, seen)], trainer, ctx


# --------------------------------------------------------------------------- cutout
@pytest.mark.parametrize("prob", [1.0, 0.5])
def test_cutout_blanks_one_clipped_square_per_image(prob):
    size = 3
    rows, _, _ = batches_around("tricks.cutout.enabled=true", f"tricks.cutout.size={size}",
                                f"tricks.cutout.prob={prob}")
    n_cut = n_full = n_kept = 0
    for x0, y0, x1, y1, seen in rows:
        assert torch.equal(seen, x1) and torch.equal(y0, y1)
        for a, b in zip(x0, x1):
            changed = (a != b).any(0)  # [H, W]
            if not changed.any():
                n_kept += 1
                continue
            n_cut += 1
            r = changed.any(1).nonzero().flatten()
            c = changed.any(0).nonzero().flatten()
            box = torch.zeros_like(changed)
            box[r.min(): r.max() + 1, c.min(): c.max() + 1] = True
            assert torch.equal(changed, box), "the blanked region is one axis-aligned rectangle"
            assert len(r) <= size and len(c) <= size and len(r) == r.max() - r.min() + 1
            assert (b[:, box] == 0).all() and torch.equal(b[:, ~box], a[:, ~box])
            n_full += len(r) == size and len(c) == size
    assert n_full > 0  # an interior centre gives the whole size x size square
    if prob == 1.0:
        assert n_kept == 0
    else:
        assert n_cut > 0 and n_kept > 0


def test_cutout_default_size_is_half_the_image_and_refuses_non_images():
    _, ctx = build_run("tricks.cutout.enabled=true")
    assert ctx.plugins[0].size == 4  # 8x8 fake images
    with pytest.raises(RecipeError, match="tricks.cutout needs images"):
        build_run("tricks.cutout.enabled=true", "data.shape=[1,16]")


# --------------------------------------------------------------------------- mixup / cutmix
def test_mixup_batches_and_targets_match_a_convex_combination():
    rows, _, _ = batches_around("tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0.4", "tricks.mix.cutmix_alpha=0")
    for x0, y0, x1, y1, seen in rows:
        assert torch.equal(seen, x1)
        expected, lams = h.mixup_reference(x0, y0, x1)
        assert lams and max(lams) - min(lams) < 1e-4, "one lambda per batch"
        assert 0 < lams[0] < 1 and not torch.equal(x0, x1)
        torch.testing.assert_close(y1, expected.float(), atol=1e-5, rtol=0)


def _cutmix_reference(x0, y0, x1):
    n, _, h, w = x0.shape
    targets = []
    for i in range(n):
        changed = (x0[i] != x1[i]).any(0)
        if not changed.any():
            targets.append(onehot(y0[i]))
            continue
        r = changed.any(1).nonzero().flatten()
        c = changed.any(0).nonzero().flatten()
        box = torch.zeros_like(changed)
        box[r.min(): r.max() + 1, c.min(): c.max() + 1] = True
        assert torch.equal(changed, box)
        partners = [j for j in range(n) if torch.equal(x1[i][:, box], x0[j][:, box])]
        assert partners, "the pasted box comes from another sample of the batch"
        area = box.sum().item() / (h * w)
        targets.append((1 - area) * onehot(y0[i]) + area * onehot(y0[partners[0]]))
    return torch.stack(targets)


def test_cutmix_pastes_a_box_and_mixes_targets_by_its_area():
    rows, _, _ = batches_around("tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0", "tricks.mix.cutmix_alpha=1.0")
    for x0, y0, x1, y1, seen in rows:
        assert torch.equal(seen, x1)
        torch.testing.assert_close(y1, _cutmix_reference(x0, y0, x1), atol=1e-6, rtol=0)
    assert any(not torch.equal(r[0], r[2]) for r in rows)


def test_mix_soft_targets_reach_the_loss_and_train_acc_is_not_reported():
    losses = []
    trainer, _ = build_run("tricks.mix.enabled=true", last=Hook(loss=lambda s: record_losses(s, losses)))
    state = trainer.fit()
    assert "train/acc" not in state.history[-1]
    for out, y, _, loss in losses:
        assert y.is_floating_point()
        naive = -(y * torch.log_softmax(out, 1)).sum(1).mean()
        torch.testing.assert_close(loss, naive)


def test_mix_refusals():
    with pytest.raises(RecipeError, match="both 0"):
        build_run("tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0", "tricks.mix.cutmix_alpha=0")
    with pytest.raises(ConflictError, match="train/acc"):
        build_run("tricks.mix.enabled=true", "train.monitor=train/acc")


# --------------------------------------------------------------------------- loss tricks
def test_label_smoothing_loss_is_cross_entropy_on_smoothed_targets():
    eps, losses = 0.2, []
    trainer, _ = build_run("tricks.label_smoothing.enabled=true", f"tricks.label_smoothing.eps={eps}",
                           last=Hook(loss=lambda s: record_losses(s, losses)))
    trainer.fit()
    assert losses
    for out, y, _, loss in losses:
        q = (1 - eps) * onehot(y) + eps / C
        torch.testing.assert_close(loss, -(q * torch.log_softmax(out, 1)).sum(1).mean())


def test_focal_loss_with_per_class_alpha():
    alpha, gamma, losses = [0.1, 0.2, 0.3, 0.4], 2.0, []
    trainer, ctx = build_run("tricks.focal.enabled=true", f"tricks.focal.gamma={gamma}",
                             f"tricks.focal.alpha=[{','.join(map(str, alpha))}]",
                             last=Hook(loss=lambda s: record_losses(s, losses)))
    trainer.fit()
    for out, y, _, loss in losses:
        naive = h.naive_focal(out, onehot(y), gamma, torch.tensor(alpha)).mean()
        torch.testing.assert_close(loss.double(), naive, rtol=1e-5, atol=1e-6)
    with pytest.raises(RecipeError, match="4 classes"):
        build_run("tricks.focal.enabled=true", "tricks.focal.alpha=[0.5,0.5]")
    with pytest.raises(RecipeError, match="binary"):
        build_run("tricks.focal.enabled=true", "tricks.focal.alpha=0.25")


def _imbalanced_csv(tmp_path):
    g = torch.Generator().manual_seed(0)
    counts = [60, 25, 10]
    lines = ["a,b,c,label"]
    for k, n in enumerate(counts):
        for _ in range(n):
            v = (torch.randn(3, generator=g) + 2 * k).tolist()
            lines.append(",".join(f"{t:.5f}" for t in v) + f",{k}")
    path = tmp_path / "imb.csv"
    path.write_text("\n".join(lines) + "\n")
    return ["data.name=csv", f"data.root={path}", "model.name=mlp", "model.kwargs={hidden: [8]}"]


def _cb_weights(train_set, beta, k):
    counts = torch.bincount(torch.tensor([int(train_set[i][1]) for i in range(len(train_set))]), minlength=k)
    eff = (1 - beta ** counts.double()) / (1 - beta)
    w = 1 / eff
    return w * k / w.sum(), counts


@pytest.mark.parametrize("focal", [False, True])
def test_class_balanced_weights_from_training_counts(tmp_path, focal):
    beta, losses = 0.99, []
    extra = ["tricks.focal.enabled=true", "tricks.focal.gamma=1.5"] if focal else []
    trainer, ctx = build_run(*_imbalanced_csv(tmp_path), "tricks.class_balanced.enabled=true",
                             f"tricks.class_balanced.beta={beta}", *extra,
                             last=Hook(loss=lambda s: record_losses(s, losses)))
    w, counts = _cb_weights(ctx.data.train, beta, 3)
    assert counts[0] > counts[1] > counts[2]  # imbalanced, so the weights are not all 1
    torch.testing.assert_close(ctx.loss_fn.weight.double(), w)
    trainer.fit()
    for out, y, _, loss in losses:
        if focal:  # weighted mean: sum_n w_y (1 - p_y)^g (-log p_y) / sum_n w_y
            naive = (h.naive_focal(out, onehot(y, 3), 1.5) * w[y]).sum() / w[y].sum()
        else:
            naive = F.cross_entropy(out.double(), y, weight=w)
        torch.testing.assert_close(loss.double(), naive, rtol=1e-5, atol=1e-6)


def test_l1_penalty_added_to_the_loss():
    lam, losses, params = 1e-3, [], []

    def rec(s):
        record_losses(s, losses)
        params.append(sum(p.detach().abs().sum() for p in s.model.parameters() if p.requires_grad))

    trainer, _ = build_run("tricks.l1.enabled=true", f"tricks.l1.weight={lam}", last=Hook(loss=rec))
    trainer.fit()
    for (out, y, _, loss), l1 in zip(losses, params):
        torch.testing.assert_close(loss, F.cross_entropy(out, y) + lam * l1, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- distillation
@pytest.fixture
def teacher_module(tmp_path, monkeypatch):
    return h.write_teacher_module(tmp_path, monkeypatch)


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
    from trickbag.train.checkpoint import load_checkpoint
    from trickbag.train.run import train_recipe

    teacher_run = load_recipe("digits", [*BASE, f"run.dir={tmp_path}", "run.name=teacher", "model.kwargs={width: 8}"])
    train_recipe(teacher_run, quiet=True)
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


def test_mix_and_cutout_resume_draws_the_same_batches(tmp_path):
    """The tricks' generators travel in checkpoints: 1 epoch + resume equals 2 epochs straight."""
    from trickbag.train.checkpoint import load_checkpoint
    from trickbag.train.run import resume_run, train_recipe

    tricks = ["tricks.mix.enabled=true", "tricks.cutout.enabled=true", "schedule.name=constant", f"run.dir={tmp_path}"]
    train_recipe(load_recipe("digits", [*BASE, *tricks, "train.epochs=2", "run.name=straight"]), quiet=True)
    train_recipe(load_recipe("digits", [*BASE, *tricks, "train.epochs=1", "run.name=resumed"]), quiet=True)
    resume_run(tmp_path / "resumed", ["train.epochs=2"], quiet=True)
    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "last.pt")
    assert set(a["plugins"]) >= {"mix", "cutout"}
    for k, v in a["model"].items():
        torch.testing.assert_close(b["model"][k], v, rtol=0, atol=0)


@pytest.mark.parametrize("cls,args", [("MixPlugin", (1.0, 1.0, 1.0, 0.5, 0.0)), ("CutoutPlugin", (4, 1.0))])
def test_a_resumed_rank_above_0_forks_the_trick_generator_rank_0_continues_it(cls, args):
    """A checkpoint holds rank 0's generator; after loading it, rank 1 must not repeat rank 0's draws."""
    import hashlib

    from trickbag.train.tricks import batch_loss as B

    saved = torch.Generator().manual_seed(123)
    torch.rand(5, generator=saved)  # somewhere mid-stream
    state = {"generator": saved.get_state()}
    expected_rank0 = torch.rand(4, generator=torch.Generator().set_state(saved.get_state()))
    draws = {}
    for rank in (0, 1, 2):
        p = getattr(B, cls)(*args)
        p.rank, p.generator = rank, torch.Generator().manual_seed(999)
        p.load_state_dict(state)
        draws[rank] = torch.rand(4, generator=p.generator)
    assert torch.equal(draws[0], expected_rank0)  # rank 0: exactly the saved stream
    # rank 1: seeded from one draw of the saved stream and its rank (written out here independently)
    ref = torch.Generator().set_state(saved.get_state())
    base = int(torch.randint(0, 2**62, (1,), generator=ref).item())
    seed = int.from_bytes(hashlib.sha256(f"{base}/1".encode()).digest()[:8], "little") & (2**63 - 1)
    assert torch.equal(draws[1], torch.rand(4, generator=torch.Generator().manual_seed(seed)))
    assert not torch.equal(draws[1], draws[0]) and not torch.equal(draws[1], draws[2])
