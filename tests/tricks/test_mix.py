"""Mixup / CutMix from a recipe: the batches and soft targets the loss sees, refusals."""

from __future__ import annotations

import pytest
import torch

from trickbag.errors import ConflictError, RecipeError

from .helpers import Hook, batches_around, build_run, mixup_reference, onehot, record_losses


def test_mixup_batches_and_targets_match_a_convex_combination():
    rows, _, _ = batches_around("tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0.4", "tricks.mix.cutmix_alpha=0")
    for x0, y0, x1, y1, seen in rows:
        assert torch.equal(seen, x1)
        expected, lams = mixup_reference(x0, y0, x1)
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


def test_off_epoch_mixes_the_first_epochs_then_gives_plain_batches_with_smoothed_targets():
    before, after = [], []
    first = Hook(batch_start=lambda s: before.append((s.epoch, s.batch[0].clone(), s.batch[1].clone())))
    last = Hook(batch_start=lambda s: after.append((s.batch[0].clone(), s.batch[1].clone())))
    trainer, ctx = build_run("tricks.mix.enabled=true", "tricks.mix.off_epoch=1", "tricks.label_smoothing.enabled=true",
                             "tricks.label_smoothing.eps=0.1", "train.epochs=3", first=first, last=last)
    trainer.fit()
    k = ctx.num_outputs
    assert {e for e, _, _ in before} == {0, 1, 2}
    for (epoch, x0, y0), (x1, y1) in zip(before, after):
        if epoch == 0:
            continue
        assert torch.equal(x0, x1)  # not mixed after off_epoch
        smoothed = onehot(y0, k) * (1 - 0.1) + 0.1 / k  # label smoothing, applied once, as the mixed targets had it
        torch.testing.assert_close(y1, smoothed.float(), atol=1e-6, rtol=0)
    assert any(not torch.equal(x0, x1) for (e, x0, _), (x1, _) in zip(before, after) if e == 0)


def test_mode_elem_draws_a_lambda_per_sample_with_the_tricks_generator():
    rows, trainer, _ = batches_around("tricks.mix.enabled=true", "tricks.mix.mode=elem", "tricks.mix.cutmix_alpha=0",
                                      "tricks.mix.mixup_alpha=0.4")
    for _x0, _, x1, y1, seen in rows:
        assert torch.equal(seen, x1)
        # mixup with the mirror sample: the weight of sample i's own class differs from sample to sample
        assert len({round(float(v), 5) for v in y1.max(1).values}) > 1
    assert any(p.name == "mix" and p.state_dict() is not None for p in trainer.plugins)  # checkpointed generator
