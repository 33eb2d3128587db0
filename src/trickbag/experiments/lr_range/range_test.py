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
           "set_group_lrs"]

Rule = Literal["steepest", "min10"]
RULES = ("steepest", "min10")
RULE_TEXT = {
    "steepest": "steepest descent of the smoothed loss against log10(lr), before its minimum",
    "min10": "lr at the minimum of the smoothed loss / 10",
}


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


def suggest_lr(lrs: Sequence[float], smoothed: Sequence[float], rule: Rule = "steepest") -> tuple[float, str]:
    """The suggested LR of a range test and the rule actually used (``steepest`` falls back to ``min10``).

    * ``steepest``: the LR where the smoothed loss falls fastest against ``log10(lr)`` (the most
      negative ``np.gradient``), looking only at the part of the curve before its minimum;
    * ``min10``: the LR of the smoothed minimum divided by 10 (the loss still falls there, well
      short of divergence).

    Args:
        lrs: increasing learning rates, one per step.
        smoothed: smoothed loss at each LR (same length).
        rule: ``"steepest"`` or ``"min10"``.

    Returns:
        ``(lr, rule_used)``. ``steepest`` needs at least 3 points before the minimum and a falling
        curve; otherwise ``min10`` is used and returned as the rule.

    >>> lrs = [1e-3, 1e-2, 1e-1, 1.0, 10.0]
    >>> suggest_lr(lrs, [1.0, 0.9, 0.3, 0.2, 5.0])  # central differences per decade: -0.1, -0.35, -0.35, -0.1
    (0.01, 'steepest')
    >>> suggest_lr(lrs, [1.0, 0.9, 0.3, 0.2, 5.0], "min10")
    (0.1, 'min10')
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
    if rule == "steepest" and i_min >= 2:
        grad = np.gradient(y[: i_min + 1], np.log10(x[: i_min + 1]))
        k = int(np.argmin(grad))
        if grad[k] < 0:
            return float(x[k]), "steepest"
    return float(x[i_min] / 10.0), "min10"


@dataclasses.dataclass
class LRFindResult:
    """Record of an LR range test."""

    lrs: list[float]  #: LR of each step (group 0)
    losses: list[float]  #: raw loss at each step
    smoothed: list[float]  #: bias-corrected EMA of the losses
    suggestion: float  #: suggested LR
    rule: str  #: rule used for the suggestion ("steepest" or "min10")
    stop_reason: str | None  #: why the test ended early, None if it ran all steps

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

    def result(self, rule: Rule = "steepest") -> LRFindResult:
        """The record and the suggestion (ValueError when no finite loss was recorded)."""
        if not self.lrs:
            raise ValueError(f"no update was recorded{f' ({self.stop_reason})' if self.stop_reason else ''}")
        suggestion, used = suggest_lr(self.lrs, self.smoothed, rule)
        return LRFindResult(list(self.lrs), list(self.losses), list(self.smoothed), suggestion, used,
                            self.stop_reason)


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
