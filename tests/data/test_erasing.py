"""Random erasing against torchvision's RandomErasing (the same box distribution) and its per-image rules."""

from __future__ import annotations

import math

import pytest
import torch
from torchvision.transforms import v2

from trickbag.data import random_erasing

H, W = 16, 24  # not square: a height/width mix-up shows


def box_of(before, after):
    """(top, left, h, w) of the one rectangle that changed in ``after`` [C, H, W], or None."""
    changed = (before != after).any(0)
    if not changed.any():
        return None
    r = changed.any(1).nonzero().flatten()
    c = changed.any(0).nonzero().flatten()
    top, left, h, w = int(r.min()), int(c.min()), int(r.max() - r.min() + 1), int(c.max() - c.min() + 1)
    rect = torch.zeros_like(changed)
    rect[top:top + h, left:left + w] = True
    assert torch.equal(changed, rect), "the erased region is one axis-aligned rectangle"
    return top, left, h, w


def fits_the_rules(h, w, scale, ratio):
    """h = round(sqrt(A r)), w = round(sqrt(A / r)) for some area fraction A/(H W) in scale and r in ratio."""
    area_lo, area_hi = (h - 0.5) * (w - 0.5), (h + 0.5) * (w + 0.5)
    r_lo, r_hi = (h - 0.5) / (w + 0.5), (h + 0.5) / (w - 0.5)
    return (area_lo <= scale[1] * H * W and area_hi >= scale[0] * H * W and r_lo <= ratio[1] and r_hi >= ratio[0]
            and h < H and w < W)


def test_boxes_follow_torchvisions_random_erasing_distribution():
    n, scale, ratio = 3000, (0.05, 0.4), (0.5, 4.0)
    x = torch.ones(n, 1, H, W)
    torch.manual_seed(0)
    ref = v2.RandomErasing(p=1.0, scale=scale, ratio=ratio, value=0)
    theirs = [box_of(x[0], ref(x[0])) for _ in range(n)]
    out = random_erasing(x, prob=1.0, scale=scale, ratio=ratio, generator=torch.Generator().manual_seed(0))
    mine = [box_of(a, b) for a, b in zip(x, out)]
    assert None not in theirs and None not in mine

    def dist(boxes, k):
        counts = torch.bincount(torch.tensor([b[k] for b in boxes]), minlength=max(H, W) + 1).double()
        return counts / counts.sum()

    for k in (2, 3):  # the marginals of h and of w: total variation distance
        assert 0.5 * float((dist(mine, k) - dist(theirs, k)).abs().sum()) < 0.06
    for stat in (lambda b: b[2] * b[3] / (H * W), lambda b: math.log(b[2] / b[3]),
                 lambda b: b[0] / max(1, H - b[2]), lambda b: b[1] / max(1, W - b[3])):
        a = torch.tensor([stat(b) for b in mine], dtype=torch.float64)
        t = torch.tensor([stat(b) for b in theirs], dtype=torch.float64)
        se = math.sqrt(float(a.var() + t.var()) / n)
        assert abs(float(a.mean() - t.mean())) < 4 * se
    assert all(fits_the_rules(b[2], b[3], scale, ratio) for b in mine)
    assert all(b[0] + b[2] <= H and b[1] + b[3] <= W for b in mine)
    assert mine != theirs  # two streams, not one list compared with itself


@pytest.mark.parametrize("prob", [0.0, 0.25, 1.0])
def test_each_image_is_erased_with_probability_prob_and_nothing_else_changes(prob):
    n = 4000
    x = torch.rand(n, 3, H, W, generator=torch.Generator().manual_seed(1)) + 1.0
    keep = x.clone()
    out = random_erasing(x, prob=prob, generator=torch.Generator().manual_seed(2), value=-1.0)
    assert torch.equal(x, keep)  # not in place
    boxes = [box_of(a, b) for a, b in zip(x, out)]
    erased = sum(b is not None for b in boxes)
    assert abs(erased / n - prob) <= 4 * math.sqrt(prob * (1 - prob) / n)
    for b, box in zip(out, boxes):
        if box is not None:
            top, left, h, w = box
            assert (b[:, top:top + h, left:left + w] == -1.0).all()
            assert fits_the_rules(h, w, (0.02, 0.33), (0.3, 3.3))  # the defaults


def test_fill_modes():
    x = torch.full((200, 3, H, W), 5.0)
    g = torch.Generator().manual_seed(0)
    rand = random_erasing(x, prob=1.0, fill="rand", generator=g)
    pixel = random_erasing(x, prob=1.0, fill="pixel", generator=g)
    values = []
    for a, r, p in zip(x, rand, pixel):
        top, left, h, w = box_of(a, r)
        region = r[:, top:top + h, left:left + w]
        assert torch.equal(region, region[:, :1, :1].expand_as(region))  # one value per channel
        assert len(set(region[:, 0, 0].tolist())) == 3
        top, left, h, w = box_of(a, p)
        values.append(p[:, top:top + h, left:left + w].flatten())
        if h * w > 1:
            assert len(set(values[-1].tolist())) > 3  # one value per pixel
    noise = torch.cat(values).double()
    assert abs(float(noise.mean())) < 0.05 and abs(float(noise.std()) - 1) < 0.05  # standard normal


def test_same_generator_state_same_output_and_one_image():
    x = torch.randn(8, 2, H, W)
    g = torch.Generator().manual_seed(5)
    state = g.get_state()
    a = random_erasing(x, prob=0.5, fill="pixel", generator=g)
    g.set_state(state)
    assert torch.equal(random_erasing(x, prob=0.5, fill="pixel", generator=g), a)
    one = random_erasing(x[0], prob=1.0, generator=torch.Generator().manual_seed(0))
    assert one.shape == x[0].shape and box_of(x[0], one) is not None


@pytest.mark.parametrize("kwargs, error, words", [
    ({"prob": 1.5}, ValueError, r"prob must be a number in \[0, 1\], got 1.5"),
    ({"scale": (0.5, 0.2)}, ValueError, r"scale must be \(low, high\) with 0 < low <= high <= 1.0, got \(0.5, 0.2\)"),
    ({"ratio": (0.0, 2.0)}, ValueError, r"ratio must be \(low, high\) with 0 < low <= high, got \(0.0, 2.0\)"),
    ({"fill": "noise"}, ValueError, "fill must be 'const', 'rand' or 'pixel', got 'noise'"),
])
def test_bad_arguments_are_refused(kwargs, error, words):
    with pytest.raises(error, match=words):
        random_erasing(torch.zeros(2, 1, 4, 4), **kwargs)
    with pytest.raises(ValueError, match=r"x must be \[N, C, H, W\] or \[C, H, W\], got shape \(2, 4\)"):
        random_erasing(torch.zeros(2, 4))
    with pytest.raises(TypeError, match="floating-point"):
        random_erasing(torch.zeros(2, 1, 4, 4, dtype=torch.long))
