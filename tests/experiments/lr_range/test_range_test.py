"""The range test's arithmetic against formulas: bias-corrected smoothing, the LR schedule, the divergence
stop, and the suggestion rules on a curve whose steepest point is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trickbag.experiments.lr_range import RangeTest, set_group_lrs, smooth_losses, suggest_lr


def test_smooth_losses_is_the_bias_corrected_weighted_average():
    rng = np.random.default_rng(0)
    losses = rng.uniform(0.5, 3.0, size=40)
    beta = 0.9
    got = smooth_losses(losses.tolist(), beta)
    for i in range(len(losses)):
        w = (1 - beta) * beta ** np.arange(i, -1, -1)  # weight of loss_j is (1-b) b^(i-j)
        assert got[i] == pytest.approx(float(np.dot(w, losses[: i + 1]) / w.sum()), rel=1e-12)
    assert got[0] == losses[0]  # no start-up bias towards 0
    with pytest.raises(ValueError, match="beta must be a number in"):
        smooth_losses([1.0], beta=1.0)


def test_suggestion_rules_on_a_curve_with_known_steepest_point():
    lrs = np.geomspace(1e-5, 10, 121)
    u = np.log10(lrs)
    c = -2.0  # the curve falls fastest (per decade) at lr = 10^c, then rises after its minimum near 10^0
    curve = 2.0 - np.tanh(2 * (u - c)) + np.where(u > 0, 5 * u**2, 0.0)
    lr, rule = suggest_lr(lrs.tolist(), curve.tolist(), "steepest")
    assert rule == "steepest"
    assert abs(math.log10(lr) - c) <= (u[1] - u[0]) + 1e-12
    lr_min = lrs[int(np.argmin(curve))]
    assert suggest_lr(lrs.tolist(), curve.tolist(), "min10") == (pytest.approx(lr_min / 10), "min10")
    # a curve that only rises has no descent: steepest falls back to min10 and says so
    assert suggest_lr([1e-3, 1e-2, 1e-1], [1.0, 2.0, 3.0], "steepest") == (pytest.approx(1e-4), "min10")
    with pytest.raises(ValueError, match="strictly increasing"):
        suggest_lr([1e-2, 1e-3, 1e-1], [1.0, 0.5, 0.2])


def test_range_test_schedule_smoothing_and_divergence_stop():
    """Fed a falling-then-exploding loss: LRs follow start*(end/start)^(i/(steps-1)), the smoothed values
    are smooth_losses of what was recorded, and the test stops at the first step whose smoothed loss
    exceeds `diverge` x the running minimum (found here by a naive scan)."""
    steps, beta, diverge = 50, 0.8, 3.0
    losses = np.concatenate([np.linspace(2.0, 0.5, 30), 0.5 * 1.6 ** np.arange(1, 21)])
    smoothed = np.array(smooth_losses(losses.tolist(), beta))
    first_bad = next(i for i in range(len(losses)) if smoothed[i] > diverge * smoothed[: i + 1].min())
    t = RangeTest(steps, start=1e-5, end=1.0, beta=beta, diverge=diverge)
    for loss in losses:
        if t.done:
            break
        t.record(t.next_lr, loss)
    assert len(t.lrs) == first_bad + 1 and t.stop_reason == "smoothed loss above 3x its minimum"
    np.testing.assert_allclose(t.lrs, 1e-5 * (1e5) ** (np.arange(first_bad + 1) / (steps - 1)), rtol=1e-12)
    np.testing.assert_allclose(t.smoothed, smoothed[: first_bad + 1], rtol=1e-12)
    res = t.result("min10")
    assert res.suggestion == pytest.approx(t.lrs[int(np.argmin(t.smoothed))] / 10)
    # a non-finite loss stops at once, with an infinite smoothed value that the suggestion ignores
    t = RangeTest(10, 1e-3, 1.0)
    for loss in (1.0, 0.9, 0.8, float("nan"), 0.1):
        if not t.done:
            t.record(t.next_lr, loss)
    assert len(t.lrs) == 4 and t.smoothed[-1] == math.inf and t.stop_reason.startswith("loss not finite at lr")
    assert t.result("min10").suggestion == pytest.approx(t.lrs[2] / 10)
    # without a stop, exactly `steps` updates
    t = RangeTest(5, 1e-3, 1.0)
    while not t.done:
        t.record(t.next_lr, 1.0)
    assert len(t.lrs) == 5 and t.stop_reason is None and t.lrs[-1] == pytest.approx(1.0)


def test_group_lrs_keep_their_ratios_and_groups_added_later_join():
    groups = [{"lr": 0.2, "initial_lr": 0.4}, {"lr": 0.05, "initial_lr": 0.1}]
    bases: list[float] = []
    set_group_lrs(groups, 1e-3, bases)
    assert bases == [0.4, 0.1] and [g["lr"] for g in groups] == pytest.approx([1e-3, 2.5e-4])
    groups.append({"lr": 0.8})  # e.g. unfrozen layers: its base is its own lr, recorded before it is changed
    set_group_lrs(groups, 1e-2, bases)
    assert bases == [0.4, 0.1, 0.8] and [g["lr"] for g in groups] == pytest.approx([1e-2, 2.5e-3, 2e-2])


def _naive_valley(y):
    """fastai's valley rule written out: the longest strictly decreasing subsequence, two thirds down it."""
    best_len, best_end, lds = 0, 0, []
    for i, v in enumerate(y):
        lds.append(1 + max([lds[j] for j in range(i) if y[j] > v], default=0))
        if lds[i] > best_len:
            best_len, best_end = lds[i], i
    start = max(0, best_end - best_len)
    third = (best_end - start) / 3
    return start + int(third) + int(third / 2)


def test_the_default_rule_is_the_valley_and_skips_the_noisy_start():
    rng = np.random.default_rng(0)
    lrs = np.geomspace(1e-6, 10, 200)
    u = np.log10(lrs)
    # a drop of 0.5 over the first 4 points (noise of a few batches), then the real descent around 1e-2
    curve = 2.0 - np.tanh(1.5 * (u + 2)) + np.where(u > -0.5, 8 * (u + 0.5) ** 2, 0.0)
    curve[:4] += np.array([0.5, 0.2, 0.05, 0.0])
    curve = curve + rng.normal(0, 0.002, curve.shape)
    lr, rule = suggest_lr(lrs.tolist(), curve.tolist())
    skip = 20  # the first tenth
    assert rule == "valley" and lr == lrs[skip + _naive_valley(curve[skip:].tolist())]
    assert 1e-3 <= lr <= 1e-1  # the descent around 1e-2, not the start of the range
    assert suggest_lr(lrs.tolist(), curve.tolist(), "steepest")[0] > 1e-4  # the skip helps steepest too


def test_a_suggestion_at_an_end_of_the_range_or_on_a_flat_curve_is_unreliable():
    from trickbag.experiments.lr_range.range_test import unreliable

    lrs = np.geomspace(1e-6, 10, 100).tolist()
    falling = np.linspace(3.0, 1.0, 100).tolist()
    assert "end of the range" in unreliable(lrs, falling, 10.0) and "--end" in unreliable(lrs, falling, 10.0)
    assert "start of the range" in unreliable(lrs, falling, 1e-6) and "--steps" in unreliable(lrs, falling, 1e-6)
    flat = (2.0 + 0.01 * np.sin(np.arange(100))).tolist()
    assert "never fell" in unreliable(lrs, flat, 1e-3) and "wider range" in unreliable(lrs, flat, 1e-3)
    assert unreliable(lrs, falling, 1e-3) is None
