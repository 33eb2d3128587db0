"""Cutout from a recipe: the squares it blanks and the images it refuses."""

from __future__ import annotations
import math
import pytest
import torch
import torch.nn.functional as F
from trickbag.recipe import load_recipe
from trickbag.errors import ConflictError, RecipeError
from . import helpers as h

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
    with pytest.raises(RecipeError, match="tricks.cutout works on images"):
        build_run("tricks.cutout.enabled=true", "data.shape=[1,16]")
