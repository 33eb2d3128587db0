"""The arithmetic of an LR range test, shared by the hand-written-loop function and the run-path plug-in.

``lr_i = start * (end / start) ** (i / (steps - 1))``; the loss is smoothed with a bias-corrected
exponential moving average (Adam's correction, Kingma & Ba 2015)

    a_i = beta * a_{i-1} + (1 - beta) * loss_i,      smoothed_i = a_i / (1 - beta ** (i + 1)),

and the test stops as soon as the smoothed loss exceeds ``diverge`` times its minimum or a loss is
not finite. The suggestion rules are in :func:`suggest_lr`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

__all__ = ["Rule", "RULES", "RULE_TEXT", "RangeTest", "LRFindResult", "smooth_losses", "suggest_lr",
           "set_group_lrs", "unreliable"]

Rule = Literal["valley", "steepest", "min10"]
RULES = ("valley", "steepest", "min10")
RULE_TEXT = {
    "valley": "the valley: two thirds down the longest stretch over which the smoothed loss keeps falling",
    "steepest": "steepest descent of the smoothed loss against log10(lr), before its minimum",
    "min10": "lr at the minimum of the smoothed loss / 10",
}
#: the first tenth of the points is left out of the valley and steepest rules (as fastai's ``lr_find``): the
#: bias-corrected average there is the mean of a few noisy batches, and its wiggles read as steep descents
SKIP_START = 0.1
#: a suggestion closer than this fraction of the range (in log10(lr)) to either end is reported as unreliable
EDGE = 0.05
#: a smoothed loss whose minimum is not this fraction below its start "never fell"
MIN_FALL = 0.05


def _check_beta(beta: Any) -> None:
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0.0 <= beta < 1.0:
        raise ValueError(f"beta must be a number in [0, 1), got {beta!r}")


def smooth_losses(losses: Sequence[float], beta: float = 0.9) -> list[float]:
    """Bias-corrected exponential moving average of ``losses`` (Adam's correction, Kingma & Ba 2015).

    ``smoothed_i = a_i / (1 - beta^(i+1))`` with ``a_i = beta a_{i-1} + (1 - beta) loss_i``, ``a_{-1} = 0``;
    the first value equals the first loss, and a constant sequence stays constant.

    >>> smooth_losses([2.0, 2.0, 2.0], beta=0.9)
    [2.0, 2.0, 2.0]
    >>> [round(v, 4) for v in smooth_losses([1.0, 0.0], beta=0.5)]
    [1.0, 0.3333]
    """
    _check_beta(beta)
    out, avg = [], 0.0
    for i, loss in enumerate(losses):
        avg = beta * avg + (1.0 - beta) * float(loss)
        out.append(avg / (1.0 - beta ** (i + 1)))
    return out


def _valley(y: np.ndarray) -> int | None:
    """Index two thirds down the longest decreasing subsequence of ``y`` (fastai's ``valley``), or None."""
    n = y.size
    if n < 3:
        return None
    lds = np.ones(n, dtype=np.int64)
    for i in range(1, n):
        higher = y[:i] > y[i]
        if higher.any():
            lds[i] = int(lds[:i][higher].max()) + 1
    end = int(np.argmax(lds))  # the first index where the longest run ends
    start = max(0, end - int(lds[end]))
    third = (end - start) / 3
    return start + int(third) + int(third / 2)


def suggest_lr(lrs: Sequence[float], smoothed: Sequence[float], rule: Rule = "valley") -> tuple[float, str]:
    """The suggested LR of a range test and the rule actually used (``valley`` and ``steepest`` fall back to
    ``min10``).

    * ``valley`` (the default; fastai's default rule, ``fastai.callback.schedule.valley``): the longest
      stretch over which the smoothed loss keeps falling (its longest decreasing subsequence) and the
      LR two thirds of the way down it: well inside the falling part, away from its noisy start and
      from the divergence after the minimum;
    * ``steepest``: the LR where the smoothed loss falls fastest against ``log10(lr)`` (the most
      negative ``np.gradient``), looking only at the part of the curve before its minimum;
    * ``min10``: the LR of the smoothed minimum divided by 10 (the loss still falls there, well
      short of divergence).

    ``valley`` and ``steepest`` leave out the first tenth of the points (:data:`SKIP_START`, as fastai's
    ``lr_find``): there the bias-corrected average holds a few noisy batches, whose wiggles read as
    the steepest descent and put the suggestion at the start of the range.

    Args:
        lrs: increasing learning rates, one per step.
        smoothed: smoothed loss at each LR (same length).
        rule: ``"valley"``, ``"steepest"`` or ``"min10"``.

    Returns:
        ``(lr, rule_used)``. ``steepest`` needs at least 3 points before the minimum and a falling
        curve, ``valley`` a falling stretch of 3 points; otherwise ``min10`` is used and returned as the rule.

    >>> lrs = [1e-3, 1e-2, 1e-1, 1.0, 10.0]
    >>> suggest_lr(lrs, [1.0, 0.9, 0.3, 0.2, 5.0], "steepest")  # per decade: -0.1, -0.35, -0.35, -0.1
    (0.01, 'steepest')
    >>> suggest_lr(lrs, [1.0, 0.9, 0.3, 0.2, 5.0], "min10")
    (0.1, 'min10')
    >>> suggest_lr(lrs, [1.0, 0.9, 0.3, 0.2, 5.0])  # falls over indices 0..3: two thirds down is index 2
    (0.1, 'valley')
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    x = np.asarray(lrs, dtype=np.float64)
    y = np.asarray(smoothed, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise ValueError(f"lrs and smoothed must be 1-D and of equal, non-zero length; got {x.shape} and {y.shape}")
    if np.any(x <= 0) or np.any(np.diff(x) <= 0):
        raise ValueError("lrs must be positive and strictly increasing")
    finite = np.isfinite(y)
    if not finite.any():
        raise ValueError("smoothed holds no finite loss")
    i_min = int(np.nanargmin(np.where(finite, y, np.nan)))
    skip = int(x.size * SKIP_START) if x.size >= 20 else 0
    if rule == "valley":
        last = int(np.argmin(finite)) if not finite.all() else x.size  # up to the first non-finite loss
        k = _valley(y[skip:last]) if last - skip >= 3 else None
        if k is not None:
            return float(x[skip + k]), "valley"
    if rule == "steepest" and i_min - skip >= 2:
        grad = np.gradient(y[skip: i_min + 1], np.log10(x[skip: i_min + 1]))
        k = int(np.argmin(grad))
        if grad[k] < 0:
            return float(x[skip + k]), "steepest"
    return float(x[i_min] / 10.0), "min10"


def unreliable(lrs: Sequence[float], smoothed: Sequence[float], suggestion: float) -> str | None:
    """Why a suggestion should not be trusted, with what to try, or None: a curve that never fell (its
    minimum not :data:`MIN_FALL` below its start), or a suggestion at either end of the range tried
    (within :data:`EDGE` of it, in log10(lr)).

    >>> print(unreliable([1e-4, 1e-3, 1e-2, 1e-1], [2.0, 1.99, 1.98, 1.99], 1e-3))
    the smoothed loss never fell (2 -> 1.98 at best): no LR in 0.0001..0.1 trained it; try a wider range
    (--start/--end) or more --steps
    >>> print(unreliable([1e-4, 1e-3, 1e-2, 1e-1], [2.0, 1.5, 1.0, 0.5], 0.1))
    the suggestion 0.1 is at the end of the range 0.0001..0.1 (the loss was still falling there): try a larger --end
    >>> unreliable([1e-4, 1e-3, 1e-2, 1e-1], [2.0, 1.5, 1.0, 3.0], 1e-3) is None
    True
    """
    x = np.log10(np.asarray(lrs, dtype=np.float64))
    y = np.asarray(smoothed, dtype=np.float64)
    span = f"{lrs[0]:.3g}..{lrs[-1]:.3g}"
    finite = y[np.isfinite(y)]
    if finite.size and not finite.min() < finite[0] * (1 - MIN_FALL):
        return (f"the smoothed loss never fell ({finite[0]:.3g} -> {finite.min():.3g} at best): no LR in {span} "
                f"trained it; try a wider range (--start/--end) or more --steps")
    where = (np.log10(suggestion) - x[0]) / (x[-1] - x[0]) if x[-1] > x[0] else 0.5
    if where < EDGE:
        return (f"the suggestion {suggestion:.3g} is at the start of the range {span}: the curve is too noisy there "
                f"to read; try more --steps, a smaller --start, or --rule min10")
    if where > 1 - EDGE:
        return (f"the suggestion {suggestion:.3g} is at the end of the range {span} (the loss was still falling "
                f"there): try a larger --end")
    return None


@dataclasses.dataclass
class LRFindResult:
    """Record of an LR range test."""

    lrs: list[float]  #: LR of each step (group 0)
    losses: list[float]  #: raw loss at each step
    smoothed: list[float]  #: bias-corrected EMA of the losses
    suggestion: float  #: suggested LR
    rule: str  #: rule used for the suggestion ("valley", "steepest" or "min10")
    stop_reason: str | None  #: why the test ended early, None if it ran all steps
    warning: str | None = None  #: why the suggestion is unreliable and what to try (:func:`unreliable`), or None

    @property
    def rule_text(self) -> str:
        return RULE_TEXT[self.rule]

    @property
    def min_lr(self) -> float:
        """LR at the minimum of the smoothed loss."""
        return self.lrs[int(np.nanargmin(np.asarray(self.smoothed, dtype=np.float64)))]


class RangeTest:
    """One LR range test: the LR of update ``i``, the smoothed loss so far and when to stop.

    Args:
        steps: optimizer updates (>= 2).
        start, end: first and last LR, ``0 < start < end``.
        beta: smoothing factor of the loss EMA, in [0, 1).
        diverge: stop when the smoothed loss exceeds ``diverge`` x its minimum (> 1).

    >>> t = RangeTest(steps=3, start=0.01, end=1.0)
    >>> [round(t.lr(i), 6) for i in range(3)]
    [0.01, 0.1, 1.0]
    >>> t.record(t.next_lr, 2.0), t.record(t.next_lr, 1.0), t.record(t.next_lr, 30.0)
    (None, None, 'smoothed loss above 4x its minimum')
    >>> t.done, t.result("min10").rule
    (True, 'min10')
    """

    def __init__(self, steps: int = 200, start: float = 1e-6, end: float = 10.0, beta: float = 0.9,
                 diverge: float = 4.0) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
            raise ValueError(f"steps must be an integer >= 2, got {steps!r}")
        if not (isinstance(start, (int, float)) and isinstance(end, (int, float)) and 0 < start < end):
            raise ValueError(f"need 0 < start < end for the LR sweep, got start={start!r}, end={end!r}")
        if isinstance(diverge, bool) or not isinstance(diverge, (int, float)) or not diverge > 1:
            raise ValueError(f"diverge must be a number > 1 (times the best smoothed loss), got {diverge!r}")
        _check_beta(beta)
        self.steps, self.start, self.end, self.beta, self.diverge = steps, start, end, beta, diverge
        self.factor = (end / start) ** (1.0 / (steps - 1))
        self.lrs: list[float] = []
        self.losses: list[float] = []
        self.smoothed: list[float] = []
        self.stop_reason: str | None = None
        self._avg, self._best = 0.0, math.inf

    def lr(self, i: int) -> float:
        """LR of update ``i`` (0-based)."""
        return self.start * self.factor**i

    @property
    def next_lr(self) -> float:
        """LR of the next update to record."""
        return self.lr(len(self.lrs))

    @property
    def done(self) -> bool:
        """All steps recorded, or stopped early."""
        return self.stop_reason is not None or len(self.lrs) >= self.steps

    def stop(self, reason: str) -> None:
        """End the test early for a reason found outside it (e.g. non-finite gradients)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def record(self, lr: float, loss: float) -> str | None:
        """Add one update's loss at ``lr``; returns the stop reason once the test should stop early."""
        value = float(loss)
        self.lrs.append(float(lr))
        self.losses.append(value)
        if not math.isfinite(value):
            self.smoothed.append(math.inf)
            self.stop(f"loss not finite at lr {lr:.3g}")
            return self.stop_reason
        self._avg = self.beta * self._avg + (1.0 - self.beta) * value
        s = self._avg / (1.0 - self.beta ** len(self.lrs))
        self.smoothed.append(s)
        self._best = min(self._best, s)
        if s > self.diverge * self._best:
            self.stop(f"smoothed loss above {self.diverge:g}x its minimum")
        return self.stop_reason

    def result(self, rule: Rule = "valley") -> LRFindResult:
        """The record, the suggestion and whether it is reliable (ValueError when no finite loss was recorded)."""
        if not self.lrs:
            raise ValueError(f"no update was recorded{f' ({self.stop_reason})' if self.stop_reason else ''}")
        suggestion, used = suggest_lr(self.lrs, self.smoothed, rule)
        return LRFindResult(list(self.lrs), list(self.losses), list(self.smoothed), suggestion, used,
                            self.stop_reason, unreliable(self.lrs, self.smoothed, suggestion))


def set_group_lrs(param_groups: Sequence[dict[str, Any]], lr: float, bases: list[float]) -> None:
    """Set every group's LR to ``lr * base_g / base_0``, so per-group LR ratios survive the test.

    ``bases`` holds each group's base LR (``initial_lr`` when a scheduler set one, else ``lr``); a
    group not in it yet (the first call, or a group added since) is recorded before its LR changes.

    >>> groups, bases = [{"lr": 0.01}, {"lr": 0.1}], []
    >>> set_group_lrs(groups, 1e-3, bases); [g["lr"] for g in groups], bases
    ([0.001, 0.01], [0.01, 0.1])
    """
    for g in param_groups[len(bases):]:
        bases.append(float(g.get("initial_lr", g["lr"])))
    ref = bases[0] if bases else 0.0
    for g, base in zip(param_groups, bases):
        g["lr"] = lr * (base / ref if ref > 0 else 1.0)
