"""Statistics of repeated runs: mean ± sample sd, and paired differences with a Student-t interval.

An ablation runs every variant with the same seeds, so the variants can be compared seed by seed:
the per-seed differences ``d_s = variant_s - reference_s`` remove the part of the seed noise the two
runs share (same initialisation, same data order). The 95 % confidence interval of the mean
difference is the paired t-interval

    mean(d) ± t_{0.975, n-1} · sd(d) / sqrt(n),     sd with ddof = 1,

and a difference whose interval excludes 0 is called *distinguishable from seed noise*.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

__all__ = ["mean_sd", "PairedDifference", "paired_difference", "paired_p_value", "holm"]


def _as_floats(values: Sequence[float], name: str) -> list[float]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    out = []
    for v in values:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise TypeError(f"{name} must hold numbers, got {v!r}") from None
    return out


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof = 1) of ``values``; sd is NaN for fewer than 2 values.

    Args:
        values: numbers, e.g. one accuracy per seed.

    Returns:
        ``(mean, sd)``; ``(nan, nan)`` for no values.

    >>> mean_sd([0.90, 0.92, 0.94])
    (0.92, 0.02)
    >>> mean_sd([0.5])
    (0.5, nan)
    """
    xs = _as_floats(values, "values")
    n = len(xs)
    if n == 0:
        return math.nan, math.nan
    m = math.fsum(xs) / n
    if n < 2:
        return m, math.nan
    var = math.fsum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var)


@dataclasses.dataclass(frozen=True)
class PairedDifference:
    """Mean of per-seed differences ``variant - reference`` with its confidence interval."""

    n: int  #: number of seeds both sides have
    mean: float  #: mean difference
    sd: float  #: sample sd of the differences (ddof = 1)
    low: float  #: lower end of the confidence interval (NaN for n < 2)
    high: float  #: upper end of the confidence interval
    confidence: float  #: e.g. 0.95

    @property
    def distinguishable(self) -> bool:
        """True when the interval excludes 0 (the difference is larger than seed noise explains)."""
        return self.n >= 2 and not math.isnan(self.low) and (self.low > 0.0 or self.high < 0.0)


def paired_difference(
    values: Sequence[float], reference: Sequence[float], confidence: float = 0.95
) -> PairedDifference:
    """Paired Student-t confidence interval of ``mean(values - reference)`` over seeds.

    ``values[i]`` and ``reference[i]`` must come from the same seed. The interval is
    ``mean(d) ± t.ppf((1 + confidence) / 2, n - 1) · sd(d) / sqrt(n)`` (``scipy.stats.t``), the
    interval of a paired t-test; with fewer than two pairs it is undefined (NaN).

    Args:
        values: metric of the variant, one per seed.
        reference: metric of the reference variant, same seeds, same order.
        confidence: coverage of the interval, in (0, 1).

    >>> d = paired_difference([0.91, 0.93, 0.92, 0.94], [0.90, 0.91, 0.91, 0.92])
    >>> round(d.mean, 4), d.n, d.distinguishable
    (0.015, 4, True)
    >>> round(d.low, 4), round(d.high, 4)
    (0.0058, 0.0242)
    >>> paired_difference([0.91, 0.93, 0.92], [0.90, 0.90, 0.91]).distinguishable  # 3 seeds: too noisy
    False
    """
    a = _as_floats(values, "values")
    b = _as_floats(reference, "reference")
    if len(a) != len(b):
        raise ValueError(
            f"values and reference must pair up seed by seed; got {len(a)} and {len(b)} values"
        )
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), e.g. 0.95; got {confidence!r}")
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    if n == 0:
        return PairedDifference(0, math.nan, math.nan, math.nan, math.nan, float(confidence))
    m, sd = mean_sd(d)
    if n < 2:
        return PairedDifference(n, m, math.nan, math.nan, math.nan, float(confidence))
    from trickbag._optional import require

    t = require("scipy.stats", extra="app", feature="confidence intervals").t

    half = float(t.ppf((1.0 + confidence) / 2.0, n - 1)) * sd / math.sqrt(n)
    return PairedDifference(n, m, sd, m - half, m + half, float(confidence))


def paired_p_value(values: Sequence[float], reference: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test of ``mean(values - reference) = 0`` (the test whose interval
    :func:`paired_difference` gives); NaN for fewer than two pairs, 1.0 when every difference is 0.

    >>> round(paired_p_value([0.91, 0.93, 0.92, 0.94], [0.90, 0.91, 0.91, 0.92]), 4)
    0.0138
    """
    d = paired_difference(values, reference)
    if d.n < 2:
        return math.nan
    if d.sd == 0.0:
        return 1.0 if d.mean == 0.0 else 0.0
    from trickbag._optional import require

    t = require("scipy.stats", extra="app", feature="p-values").t
    stat = d.mean / (d.sd / math.sqrt(d.n))
    return float(2.0 * t.sf(abs(stat), d.n - 1))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979): a family of tests whose adjusted p is below ``alpha``
    keeps the chance of any false "helps"/"hurts" at most ``alpha``, whatever the dependence between them.

    Sorted ascending, the ``i``-th smallest p (0-based, of ``m``) becomes ``max_{j <= i} min(1, (m - j) p_(j))``.
    NaN entries are left as NaN and do not count in ``m``.

    >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03, 0.005])]
    [0.03, 0.06, 0.06, 0.02]
    """
    ps = _as_floats(p_values, "p_values")
    order = sorted((p, i) for i, p in enumerate(ps) if not math.isnan(p))
    m = len(order)
    out = [math.nan] * len(ps)
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out
