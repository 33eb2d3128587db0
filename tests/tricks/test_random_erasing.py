"""Random erasing from a recipe: the rectangles it fills in a real run (torchvision's rules for each box), the
fraction of images it erases, exact resume, its place before mix, and what it refuses."""

from __future__ import annotations

import math

import pytest
import torch

from trickbag.errors import RecipeError
from trickbag.recipe import load_recipe

from .helpers import BASE, batches_around, build_run


def _box(a, b):
    """(top, left, h, w) of the one rectangle where image b differs from a [C, H, W], or None."""
    changed = (a != b).any(0)
    if not changed.any():
        return None
    r, c = changed.any(1).nonzero().flatten(), changed.any(0).nonzero().flatten()
    top, left, h, w = int(r.min()), int(c.min()), int(r.max() - r.min() + 1), int(c.max() - c.min() + 1)
    rect = torch.zeros_like(changed)
    rect[top:top + h, left:left + w] = True
    assert torch.equal(changed, rect), "the erased region is one axis-aligned rectangle"
    return top, left, h, w


def _fits(h, w, height, width, scale, ratio):
    """torchvision's rule: h = round(sqrt(A r)), w = round(sqrt(A / r)), A / (H W) in scale, r in ratio"""
    area_lo, area_hi = (h - 0.5) * (w - 0.5), (h + 0.5) * (w + 0.5)
    return (area_lo <= scale[1] * height * width and area_hi >= scale[0] * height * width
            and (h - 0.5) / (w + 0.5) <= ratio[1] and (h + 0.5) / (w - 0.5) >= ratio[0] and h < height and w < width)


def test_each_training_image_gets_at_most_one_rectangle_by_torchvisions_rules_with_probability_prob():
    prob, scale, ratio, value = 0.5, (0.1, 0.5), (0.5, 2.0), 7.5
    rows, _, ctx = batches_around("tricks.random_erasing.enabled=true", f"tricks.random_erasing.prob={prob}",
                                  f"tricks.random_erasing.scale=[{scale[0]}, {scale[1]}]",
                                  f"tricks.random_erasing.ratio=[{ratio[0]}, {ratio[1]}]",
                                  f"tricks.random_erasing.value={value}", "data.num_samples=600", "data.shape=[2,8,12]")
    erased = total = 0
    areas = []
    for x0, y0, x1, y1, seen in rows:
        assert torch.equal(seen, x1) and torch.equal(y0, y1)
        for a, b in zip(x0, x1):
            total += 1
            box = _box(a, b)
            if box is None:
                continue
            erased += 1
            top, left, h, w = box
            assert (b[:, top:top + h, left:left + w] == value).all()
            assert _fits(h, w, 8, 12, scale, ratio), box
            areas.append(h * w / 96)
    assert total == len(ctx.data.train) > 400
    assert abs(erased / total - prob) <= 4 * math.sqrt(prob * (1 - prob) / total)
    assert min(areas) < 0.2 and max(areas) > 0.4  # the boxes span the scale range


def test_a_resumed_run_erases_the_same_rectangles(tmp_path):
    """1 epoch + resume equals 2 epochs straight, weights bit for bit: the generator travels in checkpoints."""
    from trickbag.runs.run import resume_run, run_recipe
    from trickbag.train.checkpoint_files import load_checkpoint

    over = [*BASE, "tricks.random_erasing.enabled=true", "tricks.random_erasing.prob=0.7",
            "tricks.random_erasing.fill=pixel", "schedule.name=constant", f"run.dir={tmp_path}"]
    run_recipe(load_recipe("digits", [*over, "train.epochs=2", "run.name=straight"]), quiet=True)
    run_recipe(load_recipe("digits", [*over, "train.epochs=1", "run.name=resumed"]), quiet=True)
    resume_run(tmp_path / "resumed", ["train.epochs=2"], quiet=True)
    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "last.pt")
    assert "random_erasing" in a["plugins"]
    for k, v in a["model"].items():
        torch.testing.assert_close(b["model"][k], v, rtol=0, atol=0)


def test_it_erases_each_image_before_mix_mixes_them():
    from trickbag.tricks import TRICKS

    order = list(TRICKS)
    assert order.index("cutout") < order.index("mix") and order.index("random_erasing") < order.index("mix")
    trainer, _ = build_run("tricks.random_erasing.enabled=true", "tricks.mix.enabled=true")
    names = [type(p).__name__ for p in trainer.plugins]
    assert names.index("RandomErasingPlugin") < names.index("MixPlugin")


def test_non_images_are_refused_in_one_line():
    with pytest.raises(RecipeError) as err:
        build_run("tricks.random_erasing.enabled=true", "data.shape=[1,16]")
    assert str(err.value).startswith("tricks.random_erasing works on images [C, H, W]; the training samples have "
                                     "shape [1, 16]") and "\n" not in str(err.value)


@pytest.mark.parametrize("key, words", [
    ("tricks.random_erasing.scale=[0.5, 0.2]", r"0 < low <= high <= 1 \(e.g. \[0.02, 0.33\]\), got \[0.5, 0.2\]"),
    ("tricks.random_erasing.scale=[0.1]", r"got \[0.1\]"),
    ("tricks.random_erasing.ratio=[0, 2]", r"0 < low <= high \(e.g. \[0.3, 3.3\]\), got \[0.0, 2.0\]"),
    ("tricks.random_erasing.fill=noise", "'const', 'rand' or 'pixel'"),
    ("tricks.random_erasing.prob=2", "less than or equal to 1"),
])
def test_bad_keys_are_refused(key, words):
    with pytest.raises(RecipeError, match=words) as err:
        load_recipe("digits", ["tricks.random_erasing.enabled=true", key])
    assert "tricks.random_erasing" in str(err.value) and "\n" not in str(err.value)
