"""Cutout from a recipe: the squares it blanks and the images it refuses."""

from __future__ import annotations

import pytest
import torch

from trickbag.errors import RecipeError

from .helpers import batches_around, build_run


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
