"""Ablation statistics against scipy / numpy: mean ± sd and the paired t-interval over seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from trickbag.experiments.stats import mean_sd, paired_difference


def test_mean_sd_matches_numpy_sample_sd():
    rng = np.random.default_rng(0)
    x = rng.normal(0.9, 0.02, size=7)
    m, sd = mean_sd(x.tolist())
    assert m == pytest.approx(float(np.mean(x)), abs=1e-15)
    assert sd == pytest.approx(float(np.std(x, ddof=1)), rel=1e-12)  # ddof=0 would be ~7 % smaller
    assert math.isnan(mean_sd([0.5])[1]) and mean_sd([0.5])[0] == 0.5
    assert all(math.isnan(v) for v in mean_sd([]))


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_paired_interval_matches_scipy_ttest_rel(n):
    rng = np.random.default_rng(n)
    ref = rng.normal(0.90, 0.03, size=n)
    var = ref + rng.normal(0.01, 0.01, size=n)
    d = paired_difference(var.tolist(), ref.tolist())
    res = stats.ttest_rel(var, ref)
    ci = res.confidence_interval(0.95)
    assert d.n == n
    assert d.mean == pytest.approx(float(np.mean(var - ref)), abs=1e-14)
    assert d.sd == pytest.approx(float(np.std(var - ref, ddof=1)), rel=1e-12)
    assert (d.low, d.high) == pytest.approx((ci.low, ci.high), rel=1e-10, abs=1e-14)
    # the interval excludes 0 exactly when the two-sided paired t-test rejects at 5 %
    assert d.distinguishable == bool(res.pvalue < 0.05)


def test_other_confidence_levels_match_scipy():
    ref = [0.80, 0.82, 0.79, 0.85]
    var = [0.83, 0.84, 0.80, 0.88]
    for c in (0.5, 0.9, 0.99):
        d = paired_difference(var, ref, confidence=c)
        ci = stats.ttest_rel(var, ref).confidence_interval(c)
        assert (d.low, d.high) == pytest.approx((ci.low, ci.high), rel=1e-10)


def test_pairing_removes_shared_seed_noise():
    """Large seed-to-seed noise shared by both variants: paired says distinguishable, unpaired would not."""
    noise = np.array([0.70, 0.95, 0.80, 0.60, 0.90])
    ref, var = noise, noise + np.array([0.010, 0.012, 0.011, 0.009, 0.010])
    d = paired_difference(var.tolist(), ref.tolist())
    assert d.distinguishable and d.low > 0
    unpaired = stats.ttest_ind(var, ref).confidence_interval(0.95)
    assert unpaired.low < 0 < unpaired.high  # an unpaired (pooled) interval hides the effect


def test_small_n_uses_t_not_normal_quantile():
    d = paired_difference([1.0, 1.1, 1.3], [1.0, 1.0, 1.0])
    sd = float(np.std([0.0, 0.1, 0.3], ddof=1))
    half_t = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert d.high - d.mean == pytest.approx(half_t, rel=1e-12)
    assert d.high - d.mean > 2 * 1.96 * sd / math.sqrt(3)  # t(2) is 4.30, more than twice 1.96


def test_degenerate_cases():
    one = paired_difference([0.9], [0.8])
    assert one.n == 1 and one.mean == pytest.approx(0.1) and math.isnan(one.low) and not one.distinguishable
    same = paired_difference([0.9, 0.8], [0.9, 0.8])
    assert (same.mean, same.low, same.high, same.distinguishable) == (0.0, 0.0, 0.0, False)
    assert paired_difference([], []).n == 0


def test_bad_input():
    with pytest.raises(ValueError, match="pair up seed by seed; got 2 and 3"):
        paired_difference([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="confidence must be a number in"):
        paired_difference([1, 2], [1, 2], confidence=95)
    with pytest.raises(TypeError, match="values must hold numbers"):
        paired_difference(["a", 1], [1, 2])


# --- paired p-values and Holm's correction (docs/evidence.md's verdicts) -----------------------------------

def test_paired_p_value_is_scipys_paired_t_test():
    import random

    from scipy import stats as st

    from trickbag.experiments.stats import paired_p_value

    rng = random.Random(3)
    for n in (2, 3, 10, 25):
        a = [rng.gauss(0.9, 0.02) for _ in range(n)]
        b = [x - rng.gauss(0.005, 0.01) for x in a]
        assert abs(paired_p_value(a, b) - float(st.ttest_rel(a, b).pvalue)) < 1e-12
    assert paired_p_value([0.5, 0.6], [0.5, 0.6]) == 1.0  # no difference at all
    assert paired_p_value([0.6, 0.7], [0.5, 0.6]) == 0.0  # the same non-zero difference every seed
    assert math.isnan(paired_p_value([0.6], [0.5]))


def _holm_naive(ps, alpha):
    """Holm's procedure as written in the 1979 paper: reject H_(1)..H_(k-1) where k is the first i with
    p_(i) > alpha / (m - i + 1) (1-based)."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    rejected = set()
    for rank, i in enumerate(order, start=1):
        if ps[i] > alpha / (len(ps) - rank + 1):
            break
        rejected.add(i)
    return rejected


def test_holm_adjusted_p_values_reject_what_the_step_down_procedure_rejects():
    import random

    from trickbag.experiments.stats import holm

    rng = random.Random(0)
    for _ in range(300):
        m = rng.randint(1, 12)
        ps = [rng.random() ** rng.choice((1, 3, 6)) for _ in range(m)]
        adj = holm(ps)
        assert all(a >= p for a, p in zip(adj, ps)) and all(a <= 1.0 for a in adj)
        for alpha in (0.01, 0.05, 0.1):
            assert {i for i, a in enumerate(adj) if a <= alpha} == _holm_naive(ps, alpha)


def test_holm_leaves_nan_out_of_the_family():
    from trickbag.experiments.stats import holm

    adj = holm([0.01, math.nan, 0.02])
    assert math.isnan(adj[1]) and adj[0] == pytest.approx(0.02) and adj[2] == pytest.approx(0.02)
