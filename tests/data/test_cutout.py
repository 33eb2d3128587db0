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


# --------------------------------------------------------------------------- prob
@pytest.mark.parametrize("prob", [0.0, 0.3, 0.7, 1.0])
def test_prob_matches_a_per_image_loop_with_the_plugins_draw_order(prob):
    x = torch.rand(9, 2, 6, 5, generator=gen())
    g = gen(11)
    cy = torch.randint(0, 6, (9,), generator=g)  # centres first (rows, then columns) ...
    cx = torch.randint(0, 5, (9,), generator=g)
    u = torch.rand(9, generator=g) if prob < 1 else torch.zeros(9)  # ... then one draw per image
    ref = x.clone()
    for i in range(9):
        if u[i] < prob:
            ref[i] = naive_cutout(x[i : i + 1], 3, [[int(cy[i]), int(cx[i])]], 0.5)[0]
    out = cutout(x, 3, generator=gen(11), value=0.5, prob=prob)
    assert torch.equal(out, ref)
    # what CutoutPlugin did before the option existed: cut everything, then torch.where on the same draws
    g = gen(11)
    full = cutout(x, 3, generator=g, value=0.5)
    if prob < 1:
        full = torch.where((torch.rand(9, generator=g) < prob).view(-1, 1, 1, 1), full, x)
    assert torch.equal(out, full)


def test_prob_one_draws_nothing_more_and_fraction_is_right():
    g1, g2 = gen(12), gen(12)
    cutout(torch.ones(4, 1, 5, 5), 2, generator=g1)
    cutout(torch.ones(4, 1, 5, 5), 2, generator=g2, prob=1.0)
    assert torch.equal(g1.get_state(), g2.get_state())
    out = cutout(torch.ones(4000, 1, 4, 4), 2, generator=gen(13), prob=0.25)
    cut = (out == 0).flatten(1).any(1).double().mean().item()
    assert abs(cut - 0.25) < 5 * (0.25 * 0.75 / 4000) ** 0.5


def test_prob_with_a_single_image_and_pinned_centres():
    img = torch.ones(1, 4, 4)
    g = gen(14)
    u = torch.rand(1, generator=gen(14)).item()  # the only draw: centres are given
    out = cutout(img, 2, centers=torch.tensor([1, 1]), generator=g, prob=0.5)
    assert out.shape == (1, 4, 4)
    assert bool((out == 0).any()) == (u < 0.5)


@pytest.mark.parametrize("prob, exc", [(-0.1, ValueError), (1.5, ValueError), (float("nan"), ValueError),
                                       (True, TypeError), ("0.5", TypeError)])
def test_prob_rejects_bad_values(prob, exc):
    with pytest.raises(exc, match="prob"):
        cutout(torch.ones(1, 1, 4, 4), 2, prob=prob)
