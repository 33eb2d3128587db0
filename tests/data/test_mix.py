"""mixup / cutmix / MixupCutmix against naive references and distribution formulas."""

import math

import pytest
import torch
from scipy import stats

from trickbag.data import MixupCutmix, cutmix, mixup, one_hot
from trickbag.data.mix import _sample_beta


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------- Beta sampler
@pytest.mark.parametrize("a, b", [(0.2, 0.2), (0.8, 0.8), (1.0, 1.0), (2.0, 5.0), (0.5, 3.0), (30.0, 30.0)])
def test_beta_sampler_moments_and_distribution(a, b):
    n = 20_000
    draws = _sample_beta(a, b, n, gen(1))
    assert draws.shape == (n,) and draws.dtype == torch.float64
    assert bool(((draws >= 0) & (draws <= 1)).all())
    mean = a / (a + b)
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    # 5 standard errors; for values in [0, 1] the 4th central moment is <= var, so SE(var) <= sqrt(var / n).
    assert abs(draws.mean().item() - mean) < 5 * math.sqrt(var / n)
    assert abs(draws.var(unbiased=False).item() - var) < 5 * math.sqrt(var / n)
    assert stats.kstest(draws.numpy(), stats.beta(a, b).cdf).pvalue > 1e-3


def test_beta_sampler_is_seeded_and_handles_tiny_alpha():
    torch.testing.assert_close(_sample_beta(0.3, 0.3, 50, gen(5)), _sample_beta(0.3, 0.3, 50, gen(5)))
    assert not torch.equal(_sample_beta(0.3, 0.3, 50, gen(5)), _sample_beta(0.3, 0.3, 50, gen(6)))
    tiny = _sample_beta(0.02, 0.02, 2000, gen(2))
    assert not tiny.isnan().any()
    # Beta(0.02, 0.02) puts almost all mass near 0 and 1, half on each side.
    assert abs((tiny < 0.5).double().mean().item() - 0.5) < 0.05


# ----------------------------------------------------------------- mixup
def naive_mixup(x, y_onehot, lam, perm):
    xm = torch.empty_like(x)
    ym = torch.empty_like(y_onehot)
    for i in range(x.shape[0]):
        xm[i] = lam * x[i] + (1 - lam) * x[perm[i]]
        ym[i] = lam * y_onehot[i] + (1 - lam) * y_onehot[perm[i]]
    return xm, ym


def test_mixup_matches_naive_with_int_and_soft_targets():
    x = torch.randn(5, 3, 4, 4, generator=gen())
    y = torch.tensor([0, 3, 1, 1, 2])
    perm = torch.tensor([2, 0, 4, 1, 3])
    ref_x, ref_y = naive_mixup(x, one_hot(y, 4), 0.3, perm)
    xm, ym = mixup(x, y, num_classes=4, lam=0.3, perm=perm)
    torch.testing.assert_close(xm, ref_x)
    torch.testing.assert_close(ym, ref_y)
    soft = torch.softmax(torch.randn(5, 4, generator=gen(3)), dim=1)
    _, ref_soft = naive_mixup(x, soft, 0.3, perm)
    _, ym_soft = mixup(x, soft, num_classes=4, lam=0.3, perm=perm)
    torch.testing.assert_close(ym_soft, ref_soft)


@pytest.mark.parametrize("seed", range(5))
def test_mixup_uses_the_same_lambda_and_partner_for_inputs_and_targets(seed):
    # With x = onehot(y) the mixed input must equal the mixed target exactly.
    y = torch.randint(0, 6, (7,), generator=gen(seed))
    x = one_hot(y, 6)
    x_before = x.clone()
    xm, ym = mixup(x, y, alpha=1.0, num_classes=6, generator=gen(seed))
    torch.testing.assert_close(xm, ym)
    assert torch.equal(x, x_before)  # not modified in place
    assert not torch.equal(xm, x)


def test_mixup_random_perm_is_a_permutation_for_odd_batches():
    n = 7
    x = torch.eye(n)  # sample i is e_i, so row i of the result is lam*e_i + (1-lam)*e_perm[i]
    xm, _ = mixup(x, torch.arange(n), alpha=1.0, num_classes=n, lam=0.25, generator=gen(4))
    partner = (xm - 0.25 * torch.eye(n)).argmax(dim=1)
    assert sorted(partner.tolist()) == list(range(n))


def test_mixup_lambda_follows_beta_alpha_alpha():
    alpha, g = 0.4, gen(11)
    x, y, perm = torch.tensor([[1.0], [0.0]]), torch.tensor([0, 1]), torch.tensor([1, 0])
    lams = torch.tensor([mixup(x, y, alpha, num_classes=2, perm=perm, generator=g)[0][0, 0].item() for _ in range(2000)])
    assert stats.kstest(lams.numpy(), stats.beta(alpha, alpha).cdf).pvalue > 1e-3
    g1, g2 = gen(3), gen(3)
    torch.testing.assert_close(
        mixup(torch.randn(4, 2, generator=gen()), torch.arange(4), num_classes=4, generator=g1),
        mixup(torch.randn(4, 2, generator=gen()), torch.arange(4), num_classes=4, generator=g2),
    )


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"x": torch.ones(2, 3, dtype=torch.uint8)}, TypeError, "floating point"),
        ({"alpha": 0.0}, ValueError, "alpha"),
        ({"alpha": -1.0}, ValueError, "alpha"),
        ({"lam": 1.5}, ValueError, "lam"),
        ({"perm": torch.tensor([0, 1, 2])}, ValueError, "perm"),
        ({"perm": torch.tensor([0, 2])}, ValueError, "perm values"),
        ({"y": torch.tensor([0, 1, 1])}, ValueError, "shape"),
        ({"y": torch.tensor([0, 5])}, ValueError, "found label 5"),
        ({"y": torch.ones(2, 4)}, ValueError, "soft targets"),
        ({"x": torch.ones(0, 3)}, ValueError, "empty batch"),
    ],
)
def test_mixup_rejects_bad_arguments(kwargs, exc, match):
    args = {"x": torch.ones(2, 3), "y": torch.tensor([0, 1]), "alpha": 0.2}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        mixup(args.pop("x"), args.pop("y"), args.pop("alpha"), num_classes=3, **args)


# ----------------------------------------------------------------- cutmix
def naive_cutmix(x, y_onehot, lam, perm, center):
    """Loop over pixels; the box has side round(s * (1-lam)**(1/d)) starting at c - side//2."""
    spatial = x.shape[2:]
    d = len(spatial)
    sides = [round(s * (1 - lam) ** (1 / d)) for s in spatial]
    xm = x.clone()
    pasted = 0
    for pos in torch.cartesian_prod(*[torch.arange(s) for s in spatial]).reshape(-1, d).tolist():
        if all(c - k // 2 <= p < c - k // 2 + k for p, c, k in zip(pos, center, sides)):
            pasted += 1
            for i in range(x.shape[0]):
                xm[(i, slice(None), *pos)] = x[(perm[i], slice(None), *pos)]
    lam_box = 1 - pasted / math.prod(spatial)
    ym = lam_box * y_onehot + (1 - lam_box) * y_onehot[perm]
    return xm, ym


@pytest.mark.parametrize(
    "shape, lam, center",
    [((4, 2, 8, 8), 0.75, (3, 4)), ((4, 2, 8, 6), 0.4, (0, 5)), ((3, 1, 7, 9), 0.1, (6, 0)), ((5, 3, 12), 0.5, (10,))],
)
def test_cutmix_matches_naive_loop(shape, lam, center):
    x = torch.randn(*shape, generator=gen())
    y = torch.tensor([0, 1, 2, 1, 0][: shape[0]])
    perm = torch.randperm(shape[0], generator=gen(2))
    xm, ym = cutmix(x, y, num_classes=3, lam=lam, perm=perm, center=center)
    ref_x, ref_y = naive_cutmix(x, one_hot(y, 3), lam, perm, center)
    torch.testing.assert_close(xm, ref_x)
    torch.testing.assert_close(ym, ref_y)


@pytest.mark.parametrize(
    "center, pasted_area",
    [((0, 0), 2 * 2), ((7, 7), 3 * 3), ((0, 7), 2 * 3), ((4, 4), 4 * 4)],
)
def test_cutmix_lambda_recomputed_from_the_box_clipped_at_the_border(center, pasted_area):
    # 8x8 image, lam=0.75 -> a 4x4 box (rows c-2 .. c+1), clipped at the border.
    x = torch.zeros(2, 1, 8, 8)
    x[1] = 1.0
    xm, ym = cutmix(x, torch.tensor([0, 1]), num_classes=2, lam=0.75, perm=torch.tensor([1, 0]), center=center)
    assert xm[0].sum().item() == pasted_area
    lam = 1 - pasted_area / 64
    torch.testing.assert_close(ym[0], torch.tensor([lam, 1 - lam]))
    torch.testing.assert_close(ym[1], torch.tensor([1 - lam, lam]))


def test_cutmix_1d_border_box():
    # L=10, lam=0.5 -> 5 positions from 9 - 2 = 7: only 7, 8, 9 fit.
    x = torch.zeros(2, 1, 10)
    x[1] = 1.0
    xm, ym = cutmix(x, torch.tensor([0, 1]), num_classes=2, lam=0.5, perm=torch.tensor([1, 0]), center=(9,))
    assert xm[0, 0].tolist() == [0.0] * 7 + [1.0] * 3
    torch.testing.assert_close(ym[0], torch.tensor([0.7, 0.3]))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("spatial", [(9, 7), (11,)])
def test_cutmix_targets_match_pixel_fractions(seed, spatial):
    # Each sample is a constant one-hot image of its label, so the per-channel mean of
    # the mixed image is the fraction of pixels from each class: it must equal y_soft.
    n, c = 5, 4
    y = torch.randint(0, c, (n,), generator=gen(seed))
    x = one_hot(y, c).reshape(n, c, *([1] * len(spatial))).expand(n, c, *spatial).contiguous()
    x_before = x.clone()
    xm, ym = cutmix(x, y, alpha=1.0, num_classes=c, generator=gen(seed))
    torch.testing.assert_close(xm.flatten(2).mean(2), ym)
    assert torch.equal(x, x_before)


def test_cutmix_keeps_dtype_and_is_seeded():
    x = torch.randint(0, 255, (3, 3, 6, 6), dtype=torch.uint8, generator=gen())
    a = cutmix(x, torch.tensor([0, 1, 2]), num_classes=3, generator=gen(9))
    b = cutmix(x, torch.tensor([0, 1, 2]), num_classes=3, generator=gen(9))
    assert a[0].dtype == torch.uint8
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize(
    "x, kwargs, exc, match",
    [
        (torch.ones(2, 3), {}, ValueError, "at least 3 dims"),
        (torch.ones(2, 1, 2, 2, 2), {}, ValueError, r"\[N, C, H, W\]"),
        (torch.ones(2, 1, 4, 4), {"center": (4, 0)}, ValueError, "outside"),
        (torch.ones(2, 1, 4, 4), {"center": (1,)}, TypeError, "center"),
        (torch.ones(2, 1, 4, 4), {"alpha": 0}, ValueError, "alpha"),
    ],
)
def test_cutmix_rejects_bad_arguments(x, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cutmix(x, torch.tensor([0, 1]), num_classes=2, **kwargs)


# ----------------------------------------------------------------- MixupCutmix
def onehot_images(labels, c, h=6, w=6):
    return one_hot(labels, c).reshape(-1, c, 1, 1).expand(-1, c, h, w).contiguous()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_mixupcutmix_smooths_exactly_once(eps):
    c = 5
    mix = MixupCutmix(num_classes=c, smoothing=eps, generator=gen(0))
    for step in range(30):
        y = torch.randint(0, c, (5,), generator=gen(100 + step))
        xm, ym = mix(onehot_images(y, c), y)
        mixed_onehot = xm.flatten(2).mean(2)  # pixel fractions = unsmoothed mixed targets
        torch.testing.assert_close(ym, (1 - eps) * mixed_onehot + eps / c)


def test_mixupcutmix_not_applied_returns_smoothed_onehot():
    x, y = torch.randn(3, 2, 4, 4, generator=gen()), torch.tensor([2, 0, 1])
    xm, ym = MixupCutmix(prob=0.0, num_classes=3, smoothing=0.2)(x, y)
    assert torch.equal(xm, x)
    torch.testing.assert_close(ym, (1 - 0.2) * torch.eye(3)[y] + 0.2 / 3)
    # Disabled methods: only smoothing is applied.
    xm, ym = MixupCutmix(mixup_alpha=0, cutmix_alpha=0, num_classes=3, smoothing=0.0)(x, y)
    assert torch.equal(xm, x) and torch.equal(ym, torch.eye(3)[y])


def classify(x, xm):
    if torch.equal(x, xm):
        return "none"
    binary = bool(((xm == 0) | (xm == 1)).all())
    return "cutmix" if binary else "mixup"


@pytest.mark.parametrize(
    "mixup_alpha, cutmix_alpha, prob, switch_prob, expect_applied, expect_cutmix",
    [(0.8, 1.0, 0.6, 0.3, 0.6, 0.3), (0.8, 1.0, 1.0, 0.5, 1.0, 0.5), (0.0, 1.0, 1.0, 0.5, 1.0, 1.0), (0.8, 0.0, 1.0, 0.5, 1.0, 0.0)],
)
def test_mixupcutmix_probabilities(mixup_alpha, cutmix_alpha, prob, switch_prob, expect_applied, expect_cutmix):
    c = n = 5  # distinct labels, so any mixup with 0 < lam < 1 leaves non-binary pixels
    y = torch.arange(n)
    x = onehot_images(y, c)
    mix = MixupCutmix(mixup_alpha, cutmix_alpha, prob, switch_prob, num_classes=c, smoothing=0.0, generator=gen(7))
    kinds = [classify(x, mix(x, y)[0]) for _ in range(400)]
    applied = [k for k in kinds if k != "none"]
    assert abs(len(applied) / 400 - expect_applied) < 0.1
    assert abs(sum(k == "cutmix" for k in applied) / len(applied) - expect_cutmix) < 0.12


@pytest.mark.parametrize("n", [1, 3, 5])
def test_mixupcutmix_odd_batch_sizes(n):
    c = 4
    y = torch.arange(n) % c
    mix = MixupCutmix(num_classes=c, smoothing=0.1, generator=gen(n))
    for _ in range(10):
        xm, ym = mix(onehot_images(y, c), y)
        assert xm.shape == (n, c, 6, 6) and ym.shape == (n, c)
        torch.testing.assert_close(ym, 0.9 * xm.flatten(2).mean(2) + 0.1 / c)


def test_mixupcutmix_is_reproducible_and_accepts_soft_targets():
    x = torch.randn(4, 3, 5, 5, generator=gen())
    soft = torch.softmax(torch.randn(4, 3, generator=gen(1)), 1)
    a = MixupCutmix(num_classes=3, generator=gen(3))(x, soft)
    b = MixupCutmix(num_classes=3, generator=gen(3))(x, soft)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    torch.testing.assert_close(a[1].sum(1), torch.ones(4))


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"mixup_alpha": -0.1}, ValueError, "mixup_alpha"),
        ({"cutmix_alpha": "1"}, TypeError, "cutmix_alpha"),
        ({"prob": 1.5}, ValueError, "prob"),
        ({"switch_prob": -0.5}, ValueError, "switch_prob"),
        ({"smoothing": 1.0}, ValueError, "smoothing"),
        ({"num_classes": 0}, ValueError, "num_classes"),
        ({"generator": 3}, TypeError, "generator"),
    ],
)
def test_mixupcutmix_rejects_bad_arguments(kwargs, exc, match):
    args = {"num_classes": 3}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        MixupCutmix(**args)
