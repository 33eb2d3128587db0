"""cutout against a per-pixel naive loop, its centre distribution and its border clipping."""

import pytest
import torch

from trickbag.data import cutout


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def naive_cutout(x, size, centers, value=0.0):
    out = x.clone()
    n, _, h, w = x.shape
    for i in range(n):
        cy, cx = centers[i]
        for r in range(h):
            for c in range(w):
                if cy - size // 2 <= r < cy - size // 2 + size and cx - size // 2 <= c < cx - size // 2 + size:
                    out[i, :, r, c] = value
    return out


@pytest.mark.parametrize("size", [0, 1, 2, 3, 5, 20])
def test_matches_naive_with_border_centres(size):
    x = torch.rand(6, 2, 7, 9, generator=gen())
    centers = torch.tensor([[0, 0], [6, 8], [0, 8], [6, 0], [3, 4], [1, 7]])
    out = cutout(x, size, centers=centers, value=-1.5)
    torch.testing.assert_close(out, naive_cutout(x, size, centers.tolist(), -1.5))


def test_pinned_corner_square_is_clipped():
    # size 4 centred at (0, 0): rows/cols -2..1, so only the 2x2 top-left block is inside.
    out = cutout(torch.ones(1, 1, 5, 5), 4, centers=torch.tensor([[0, 0]]))
    assert out.sum().item() == 25 - 4 and out[0, 0, :2, :2].sum().item() == 0


def test_random_centres_are_drawn_rows_then_cols_from_generator():
    x = torch.rand(5, 3, 8, 6, generator=gen())
    g = gen(4)
    cy = torch.randint(0, 8, (5,), generator=g)
    cx = torch.randint(0, 6, (5,), generator=g)
    ref = naive_cutout(x, 3, torch.stack([cy, cx], 1).tolist())
    torch.testing.assert_close(cutout(x, 3, generator=gen(4)), ref)


def test_centre_is_uniform_over_pixels():
    n, h, w = 4000, 4, 4
    out = cutout(torch.ones(n, 1, h, w), 1, generator=gen(1))
    counts = (out == 0).sum(dim=(0, 1)).flatten().double()  # size 1: the blanked pixel is the centre
    assert counts.sum().item() == n
    expected = n / (h * w)  # 250, binomial sd ~ 15.5
    assert bool(((counts - expected).abs() < 5 * (expected * (1 - 1 / (h * w))) ** 0.5).all())


def test_single_image_dtype_and_no_in_place_change():
    img = torch.full((3, 6, 6), 200, dtype=torch.uint8)
    before = img.clone()
    out = cutout(img, 2, centers=torch.tensor([2, 3]), value=7)
    assert torch.equal(img, before)
    assert out.dtype == torch.uint8 and out.shape == (3, 6, 6)
    ref = naive_cutout(img[None], 2, [[2, 3]], 7)[0]
    assert torch.equal(out, ref)


@pytest.mark.parametrize(
    "x, size, kwargs, exc, match",
    [
        (torch.ones(4, 4), 2, {}, ValueError, r"\[N, C, H, W\]"),
        (torch.ones(1, 1, 4, 4), -1, {}, ValueError, "size"),
        (torch.ones(1, 1, 4, 4), 2.0, {}, TypeError, "size"),
        (torch.ones(1, 1, 4, 4), 2, {"centers": torch.tensor([[4, 0]])}, ValueError, "inside the image"),
        (torch.ones(2, 1, 4, 4), 2, {"centers": torch.tensor([[1, 1]])}, ValueError, "shape"),
        (torch.ones(1, 1, 4, 4), 2, {"centers": torch.tensor([[1.0, 1.0]])}, TypeError, "integer"),
        (torch.ones(1, 1, 4, 4), 2, {"value": "0"}, TypeError, "value"),
    ],
)
def test_rejects_bad_arguments(x, size, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cutout(x, size, **kwargs)
