"""mixup / cutmix / MixupCutmix against naive references and distribution formulas."""

import math

import pytest
import torch
from scipy import stats

from trickbag.data import MixupCutmix, cutmix, mixup, one_hot
from trickbag.data import mix as mix_module
from trickbag.data.mix import sample_beta


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------- Beta sampler
@pytest.mark.parametrize("a, b", [(0.2, 0.2), (0.8, 0.8), (1.0, 1.0), (2.0, 5.0), (0.5, 3.0), (30.0, 30.0)])
def test_beta_sampler_moments_and_distribution(a, b):
    n = 20_000
    draws = sample_beta(a, b, n, gen(1))
    assert draws.shape == (n,) and draws.dtype == torch.float64
    assert bool(((draws >= 0) & (draws <= 1)).all())
    mean = a / (a + b)
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    # 5 standard errors; for values in [0, 1] the 4th central moment is <= var, so SE(var) <= sqrt(var / n).
    assert abs(draws.mean().item() - mean) < 5 * math.sqrt(var / n)
    assert abs(draws.var(unbiased=False).item() - var) < 5 * math.sqrt(var / n)
    assert stats.kstest(draws.numpy(), stats.beta(a, b).cdf).pvalue > 1e-3


def test_beta_sampler_is_seeded_and_handles_tiny_alpha():
    torch.testing.assert_close(sample_beta(0.3, 0.3, 50, gen(5)), sample_beta(0.3, 0.3, 50, gen(5)))
    assert not torch.equal(sample_beta(0.3, 0.3, 50, gen(5)), sample_beta(0.3, 0.3, 50, gen(6)))
    tiny = sample_beta(0.02, 0.02, 2000, gen(2))
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
    lams = torch.tensor(
        [mixup(x, y, alpha, num_classes=2, perm=perm, generator=g)[0][0, 0].item() for _ in range(2000)]
    )
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
    [
        (0.8, 1.0, 0.6, 0.3, 0.6, 0.3),
        (0.8, 1.0, 1.0, 0.5, 1.0, 0.5),
        (0.0, 1.0, 1.0, 0.5, 1.0, 1.0),
        (0.8, 0.0, 1.0, 0.5, 1.0, 0.0),
    ],
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


# ----------------------------------------------------------------- fast paths: same numbers as the tensor formulas
# The implementation draws its random numbers by refilling one cached 1-element tensor, writes the
# targets with a fill and two scatters, and pastes CutMix boxes without a temporary.  The references
# below are the plain formulas, written with torch's factories and one-hot matrices: the results must
# be equal bit for bit, from the same generator state (the trainer's resume relies on it).


def ref_log_gamma(shape, g):
    """Marsaglia & Tsang with torch.randn(1) / torch.rand(1) draws (one per call, in float64)."""
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        z = float(torch.randn(1, generator=g, dtype=torch.float64))
        u = float(torch.rand(1, generator=g, dtype=torch.float64))
        v = (1.0 + c * z) ** 3
        if v > 0 and (math.log(u) if u > 0 else -math.inf) < 0.5 * z * z + d - d * v + d * math.log(v):
            break
    out = math.log(d) + math.log(v)
    if shape < 1.0:
        u = float(torch.rand(1, generator=g, dtype=torch.float64))
        out += (math.log(u) if u > 0 else -math.inf) / shape
    return out


def ref_beta(a, g):
    return float(torch.sigmoid(torch.tensor([ref_log_gamma(a, g)], dtype=torch.float64)
                               - torch.tensor([ref_log_gamma(a, g)], dtype=torch.float64)))


def ref_targets(y, perm, lam, c, eps):
    t = y if y.is_floating_point() else one_hot(y, c)
    if perm is not None:
        t = t[perm].lerp(t, lam)
    return t * (1.0 - eps) + eps / c if eps > 0 else t


def ref_box(spatial, lam, g):
    center = [int(torch.randint(0, s, (1,), generator=g)) for s in spatial]
    ratio = (1.0 - lam) ** (1.0 / len(spatial))
    slices, area = [], 1
    for ctr, s in zip(center, spatial):
        cut = int(round(s * ratio))
        lo, hi = min(max(ctr - cut // 2, 0), s), min(max(ctr - cut // 2 + cut, 0), s)
        slices.append(slice(lo, hi))
        area *= hi - lo
    return tuple(slices), 1.0 - area / math.prod(spatial)


def ref_mixupcutmix(x, y, mixup_alpha, cutmix_alpha, prob, switch_prob, c, eps, g):
    """MixupCutmix written out: draws in the documented order, mixing by the formulas."""
    if (mixup_alpha > 0 or cutmix_alpha > 0) and float(torch.rand(1, generator=g)) < prob:
        both = mixup_alpha > 0 and cutmix_alpha > 0
        use_cutmix = float(torch.rand(1, generator=g)) < switch_prob if both else cutmix_alpha > 0
        lam = ref_beta(cutmix_alpha if use_cutmix else mixup_alpha, g)
        perm = torch.randperm(x.shape[0], generator=g)
        if use_cutmix:
            box, lam = ref_box(x.shape[2:], lam, g)
            xm = x.clone()
            for i in range(x.shape[0]):  # naive per-sample paste
                xm[(i, slice(None), *box)] = x[(int(perm[i]), slice(None), *box)]
        else:
            xm = x[perm].lerp(x, lam)
        return xm, ref_targets(y, perm, lam, c, eps)
    return x, ref_targets(y, None, 1.0, c, eps)


def assert_identical(a, b):
    for u, v in zip(a, b):
        assert u.dtype == v.dtype and u.shape == v.shape
        assert torch.equal(u, v), (u - v).abs().max()


@pytest.mark.parametrize("shape", [(0.8,), (0.2,), (1.0,), (2.0,), (0.02,)])
def test_scalar_draws_match_torch_factories(shape):
    (a,) = shape
    g1, g2 = gen(7), gen(7)
    draws = mix_module._Draws(g2)
    for _ in range(20):
        assert draws.beta(a, a) == ref_beta(a, g1)
        assert draws.rand() == float(torch.rand(1, generator=g1))
        assert draws.randint(13) == int(torch.randint(0, 13, (1,), generator=g1))
    assert torch.equal(g1.get_state(), g2.get_state())


def test_python_sigmoid_is_torch_one_element_sigmoid():
    # _Draws.beta computes the final sigmoid in Python on the CPU; torch's 1-element kernel runs the
    # scalar formula 1 / (1 + exp(-v)) with the C library's exp, as math.exp does.
    values = torch.cat([torch.randn(20_000, generator=gen(1), dtype=torch.float64) * 8,
                        torch.rand(2_000, generator=gen(2), dtype=torch.float64) * 1600 - 800,
                        torch.tensor([0.0, -0.0, 709.78, -709.78, 709.79, -709.79, 1e-300, math.inf, -math.inf],
                                     dtype=torch.float64)])
    t = torch.empty(1, dtype=torch.float64)
    for v in values.tolist():
        assert mix_module._sigmoid(v) == t.fill_(v).sigmoid_().item(), v


@pytest.fixture(params=[torch.float32, torch.float64], ids=["default-float32", "default-float64"])
def default_dtype(request):
    old = torch.get_default_dtype()
    torch.set_default_dtype(request.param)
    yield request.param
    torch.set_default_dtype(old)


@pytest.mark.parametrize("c, eps", [(1000, 0.1), (10, 0.0), (3, 0.3), (100, 0.1), (21843, 0.2), (7, 0.999)])
def test_label_targets_equal_the_one_hot_formula_on_every_write_path(c, eps, default_dtype):
    n = 24
    y = torch.randint(0, c, (n,), generator=gen(c))
    y[:6] = y[6:12]  # rows whose partner shares the label are always present
    perm = torch.cat([torch.arange(6, 12), torch.arange(6), torch.randperm(n - 12, generator=gen(3)) + 12])
    lams = [0.0, 1.0, 0.5, 0.49999997, 0.50000006, 1e-8, 1 - 1e-8] + torch.rand(300, generator=gen(4)).tolist()
    paths = set()
    for lam in lams:
        scale, off, both = mix_module._smoothing_coefficients(eps, c)
        w = mix_module._f32(lam)
        own = mix_module._f32(mix_module._f32(w * scale) + off)
        partner = mix_module._f32(mix_module._f32(mix_module._f32(1 - w) * scale) + off)
        paths.add(0 if mix_module._increment(off, own, partner, both) is not None
                  else 1 if mix_module._increment(off, partner, own, both) is not None else 2)
        got = mix_module._targets(y, None, perm, lam, c, eps, torch.device("cpu"))
        assert torch.equal(got, ref_targets(y, perm, lam, c, eps)), lam
        assert got.is_contiguous() and got.dtype == torch.float32
    # without smoothing the first write order always works; with it, each of the three paths occurs
    assert paths == {0} if eps == 0 else paths >= {0, 2}
    unmixed = mix_module._targets(y, None, None, 1.0, c, eps, torch.device("cpu"))
    assert torch.equal(unmixed, ref_targets(y, None, 1.0, c, eps))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "mixup_alpha, cutmix_alpha, prob, eps, shape",
    [(0.8, 1.0, 1.0, 0.1, (6, 3, 9, 7)), (0.8, 0.0, 0.7, 0.1, (5, 2, 4, 4)), (0.0, 1.0, 1.0, 0.0, (4, 2, 11)),
     (0.2, 0.3, 1.0, 0.3, (7, 1, 8, 8))],
)
def test_mixupcutmix_equals_the_written_out_reference(seed, mixup_alpha, cutmix_alpha, prob, eps, shape):
    c = 5
    x = torch.randn(shape, generator=gen(100 + seed))
    y = torch.randint(0, c, (shape[0],), generator=gen(200 + seed))
    soft = torch.softmax(torch.randn(shape[0], c, generator=gen(300 + seed)), 1)
    for targets in (y, soft):
        g_ref, g = gen(seed), gen(seed)
        mix = MixupCutmix(mixup_alpha, cutmix_alpha, prob, 0.5, num_classes=c, smoothing=eps, generator=g)
        mix_inplace = MixupCutmix(mixup_alpha, cutmix_alpha, prob, 0.5, num_classes=c, smoothing=eps,
                                  generator=gen(seed), inplace=True)
        for _ in range(12):
            expected = ref_mixupcutmix(x, targets, mixup_alpha, cutmix_alpha, prob, 0.5, c, eps, g_ref)
            assert_identical(mix(x, targets), expected)
            x_own = x.clone()
            xm, ym = mix_inplace(x_own, targets)
            assert xm is x_own  # the caller's tensor, mixed in place
            assert_identical((xm, ym), expected)
        assert torch.equal(g.get_state(), g_ref.get_state())


@pytest.mark.parametrize("fn", [mixup, cutmix])
def test_inplace_writes_the_default_result_into_x(fn):
    x = torch.randn(6, 3, 8, 8, generator=gen())
    y = torch.randint(0, 4, (6,), generator=gen(1))
    for perm in (None, torch.tensor([1, 1, 0, 5, 5, 2])):  # repeated partners: gathered before overwriting
        expected = fn(x, y, num_classes=4, perm=perm, generator=gen(2))
        x_own = x.clone()
        xm, ym = fn(x_own, y, num_classes=4, perm=perm, generator=gen(2), inplace=True)
        assert xm is x_own
        assert_identical((xm, ym), expected)
    with pytest.raises(TypeError, match="inplace"):
        fn(x, y, num_classes=4, inplace=1)
    with pytest.raises(TypeError, match="inplace"):
        MixupCutmix(num_classes=4, inplace="yes")


def test_cutmix_with_repeated_partners_matches_naive_loop():
    x = torch.randn(5, 2, 8, 8, generator=gen())
    y = torch.tensor([0, 1, 2, 1, 0])
    perm = torch.tensor([4, 4, 0, 0, 2])
    xm, ym = cutmix(x, y, num_classes=3, lam=0.6, perm=perm, center=(3, 5))
    ref_x, ref_y = naive_cutmix(x, one_hot(y, 3), 0.6, perm, (3, 5))
    torch.testing.assert_close(xm, ref_x, rtol=0, atol=0)
    torch.testing.assert_close(ym, ref_y)


def test_labels_are_range_checked_in_every_branch_and_other_dtypes_accepted():
    x = torch.randn(3, 2, 4, 4)
    for prob in (0.0, 1.0):
        for ma, ca in ((0.8, 0.0), (0.0, 1.0)):
            mix = MixupCutmix(ma, ca, prob, num_classes=3, generator=gen())
            with pytest.raises(ValueError, match="found label 3"):
                mix(x, torch.tensor([0, 3, 1]))
            with pytest.raises(ValueError, match="found label -1"):
                mix(x, torch.tensor([0, -1, 1]))
            y32 = torch.tensor([0, 2, 1], dtype=torch.int32)
            a = MixupCutmix(ma, ca, prob, num_classes=3, generator=gen(5))(x, y32)
            b = MixupCutmix(ma, ca, prob, num_classes=3, generator=gen(5))(x, y32.long())
            assert_identical(a, b)


def test_default_dtype_inference_mode_and_threads():
    x = torch.randn(4, 2, 5, 5, generator=gen())
    y = torch.tensor([0, 1, 2, 1])
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # the apply / switch draws follow torch.rand(1)'s dtype
    try:
        expected = ref_mixupcutmix(x, y, 0.8, 1.0, 0.5, 0.5, 3, 0.1, gen(3))
        assert_identical(MixupCutmix(prob=0.5, num_classes=3, generator=gen(3))(x, y), expected)
    finally:
        torch.set_default_dtype(old)
    with torch.inference_mode():  # the cached draw tensors are created outside inference mode
        MixupCutmix(num_classes=3, generator=gen(4))(x, y)
    MixupCutmix(num_classes=3, generator=gen(4))(x, y)

    import threading

    results, expected = {}, {s: ref_mixupcutmix(x, y, 0.8, 1.0, 1.0, 0.5, 3, 0.1, gen(s)) for s in range(4)}

    def work(seed):
        mix = MixupCutmix(num_classes=3, generator=gen(seed))
        results[seed] = [mix(x, y) for _ in range(200)][0]

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in range(4):
        assert_identical(results[s], expected[s])
