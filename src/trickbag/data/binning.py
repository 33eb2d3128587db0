"""Bin a numeric feature: equal width, quantile or decision tree, with WoE/IV for a binary target.

Used by the CSV data source (``data.bins``) and re-exported by :mod:`trickbag.extras.tabular`; the
tree method needs scikit-learn and the WoE table pandas (both imported only when used).

Binning conventions, shared by every method:

* ``edges`` are ``n_bins + 1`` increasing floats from the minimum to the maximum of
  the non-NaN training values.  Bin ``i`` is the half-open interval
  ``[edges[i], edges[i+1])``; the last bin also holds the maximum.  Codes are
  ``numpy.digitize(values, edges[1:-1])``, so values outside the training range
  fall into the first or the last bin.
* NaN gets its own code, ``n_bins`` (one past the last numeric bin), so codes are
  always in ``0..n_bins`` and can index an ``nn.Embedding(n_bins + 1, dim)``.
* Weight of evidence uses the credit-scoring convention (Siddiqi 2006,
  "Credit Risk Scorecards"): target ``1`` is the *event* ("bad"), ``0`` the
  *non-event* ("good"), and ``WoE_i = ln(%good_i / %bad_i)`` where
  ``%good_i = good_i / total_good``.  A positive WoE means fewer events than
  average.  ``IV = sum_i (%good_i - %bad_i) * WoE_i`` (always >= 0).  An empty
  cell (``good_i == 0`` or ``bad_i == 0``) has its share replaced by ``eps`` so
  the logarithm stays finite; a bin with no rows at all gets ``WoE = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from trickbag._optional import require

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Binning", "bin_feature"]

BinMethod = Literal["width", "quantile", "tree"]
_METHODS = ("width", "quantile", "tree")


def _as_float_array(values: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be a 1-D array of numbers (list, numpy array, pandas Series), got {values!r:.80}"
        ) from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if np.isinf(arr).any():
        raise ValueError(f"{name} contains +-inf; replace it with NaN (own bin) or a finite value first")
    return arr


@dataclass(frozen=True)
class Binning:
    """Result of :func:`bin_feature`: edges, training codes and, with a binary target, the WoE/IV table.

    ``edges``: ``[n_bins + 1]`` floats; ``codes``: ``[N]`` int64 in ``0..n_bins``
    (``n_bins`` is the NaN bin); ``table``: a pandas DataFrame with one row per bin
    (the NaN bin last) and columns ``bin, lower, upper, count, events, non_events,
    event_rate, woe, iv`` when a target was given, else None; ``iv``: the total
    information value (None without a target).
    """

    method: str
    edges: np.ndarray
    codes: np.ndarray
    table: pd.DataFrame | None = field(default=None, repr=False)
    iv: float | None = None

    @property
    def n_bins(self) -> int:
        """Number of numeric bins (the NaN bin not counted)."""
        return len(self.edges) - 1

    @property
    def nan_code(self) -> int:
        """Code given to NaN values: ``n_bins``."""
        return self.n_bins

    def transform(self, values: Any) -> np.ndarray:
        """Return the codes of ``values`` under the fitted edges (NaN -> ``n_bins``).

        >>> b = bin_feature([0.0, 1.0, 2.0, 3.0], n_bins=2)
        >>> b.transform([-5.0, 1.4, 1.5, 99.0, float("nan")]).tolist()
        [0, 0, 1, 1, 2]
        """
        arr = _as_float_array(values, "values")
        return _digitize(arr, self.edges)

    def woe(self, values: Any) -> np.ndarray:
        """Map ``values`` to the weight of evidence of their bin (needs a Binning fitted with a target).

        >>> b = bin_feature([0, 1, 2, 3, 4, 5], n_bins=2, target=[1, 1, 0, 1, 0, 0])
        >>> b.woe([0.5, 4.5]).round(4).tolist()
        [-0.6931, 0.6931]
        """
        if self.table is None:
            raise ValueError("woe() needs a Binning fitted with a binary target: bin_feature(values, target=y)")
        return self.table["woe"].to_numpy()[self.transform(values)]


def _digitize(arr: np.ndarray, edges: np.ndarray) -> np.ndarray:
    codes = np.digitize(arr, edges[1:-1]).astype(np.int64)
    codes[np.isnan(arr)] = len(edges) - 1
    return codes


def _check_target(target: Any, n: int) -> np.ndarray:
    y = np.asarray(target)
    if y.ndim != 1 or len(y) != n:
        raise ValueError(f"target must be 1-D with the same length as values ({n}), got shape {y.shape}")
    try:
        yf = y.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"target must hold 0/1 (or False/True), got dtype {y.dtype}") from exc
    if np.isnan(yf).any() or not np.isin(yf, (0.0, 1.0)).all():
        bad = sorted(set(np.unique(yf[~np.isin(yf, (0.0, 1.0))]).tolist()))[:5]
        raise ValueError(f"target must be binary (0 = non-event/good, 1 = event/bad), found values {bad}")
    return yf.astype(np.int64)


def tree_edges(
    x: np.ndarray, y: np.ndarray, n_bins: int, min_samples_leaf: int | float, random_state: int
) -> np.ndarray:
    DecisionTreeClassifier = require("sklearn.tree", extra="app", feature="tree binning").DecisionTreeClassifier

    tree = DecisionTreeClassifier(
        max_leaf_nodes=n_bins, min_samples_leaf=min_samples_leaf, random_state=random_state
    ).fit(x.reshape(-1, 1), y)
    is_split = tree.tree_.children_left != -1  # leaves have no children
    thresholds = np.sort(tree.tree_.threshold[is_split])
    return np.concatenate([[x.min()], thresholds, [x.max()]])


def _woe_table(codes: np.ndarray, y: np.ndarray, edges: np.ndarray, eps: float) -> tuple[pd.DataFrame, float]:
    pd = require("pandas", extra="tabular")
    n_codes = len(edges)  # numeric bins + NaN bin
    events = np.bincount(codes, weights=y, minlength=n_codes)
    count = np.bincount(codes, minlength=n_codes).astype(np.float64)
    non_events = count - events
    total_bad, total_good = events.sum(), non_events.sum()
    if total_bad == 0 or total_good == 0:
        raise ValueError(
            f"target must contain both classes for WoE/IV, got {int(total_bad)} events (1) and "
            f"{int(total_good)} non-events (0)"
        )
    pct_good = np.where(non_events == 0, eps, non_events / total_good)
    pct_bad = np.where(events == 0, eps, events / total_bad)
    woe = np.log(pct_good / pct_bad)
    iv = (pct_good - pct_bad) * woe
    with np.errstate(invalid="ignore", divide="ignore"):
        event_rate = np.where(count > 0, events / np.maximum(count, 1), np.nan)
    lower = np.concatenate([edges[:-1], [np.nan]])
    upper = np.concatenate([edges[1:], [np.nan]])
    table = pd.DataFrame(
        {
            "bin": np.arange(n_codes),
            "lower": lower,
            "upper": upper,
            "count": count.astype(np.int64),
            "events": events.astype(np.int64),
            "non_events": non_events.astype(np.int64),
            "event_rate": event_rate,
            "woe": woe,
            "iv": iv,
        }
    )
    return table, float(iv.sum())


def bin_feature(
    values: Any,
    method: BinMethod = "width",
    n_bins: int = 10,
    target: Any = None,
    *,
    eps: float = 1e-4,
    min_samples_leaf: int | float = 1,
    random_state: int = 0,
) -> Binning:
    """Bin a numeric feature into ``n_bins`` intervals (NaN in its own bin), with WoE/IV for a binary target.

    Methods:

    * ``"width"``: equal-width edges ``numpy.linspace(min, max, n_bins + 1)``;
    * ``"quantile"``: equal-frequency edges ``numpy.quantile(x, linspace(0, 1, n_bins + 1))``,
      duplicate edges (ties) dropped, so fewer bins may result;
    * ``"tree"``: supervised binning -- a ``DecisionTreeClassifier(max_leaf_nodes=n_bins)``
      is fitted on ``(x, target)`` and its split thresholds become the inner edges
      (at most ``n_bins`` bins; ``target`` required).  Thresholds are midpoints between
      training values, so the tree's ``x <= t`` and the bins' ``[lo, hi)`` agree on them.

    Bin conventions, NaN code (``n_bins``) and the WoE formula ``ln(%good / %bad)`` (target
    ``1`` = event / bad) are described in the module docstring.  ``values``: ``[N]``
    numbers (NaN allowed); ``target``: ``[N]`` of 0/1 or None.

    >>> b = bin_feature([1.0, 2.0, 3.0, 4.0, float("nan")], "width", n_bins=3)
    >>> b.edges.tolist()
    [1.0, 2.0, 3.0, 4.0]
    >>> b.codes.tolist()
    [0, 1, 2, 2, 3]
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be an int >= 1, got {n_bins!r}")
    n_bins = int(n_bins)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0 < eps < 1):
        raise ValueError(f"eps must be a float in (0, 1) replacing the share of an empty cell, got {eps!r}")
    x = _as_float_array(values, "values")
    y = _check_target(target, len(x)) if target is not None else None
    finite = ~np.isnan(x)
    if not finite.any():
        raise ValueError("values has no non-NaN entry: cannot place bin edges")
    xs = x[finite]

    if method == "width":
        edges = np.linspace(xs.min(), xs.max(), n_bins + 1)
    elif method == "quantile":
        edges = np.unique(np.quantile(xs, np.linspace(0.0, 1.0, n_bins + 1)))
    else:
        if y is None:
            raise ValueError('method="tree" is supervised binning and needs target= (a binary 0/1 array)')
        edges = tree_edges(xs, y[finite], n_bins, min_samples_leaf, random_state)
    if xs.min() == xs.max():  # a constant feature: one bin holding everything
        edges = np.array([xs.min(), xs.max()])
    codes = _digitize(x, edges)

    table, iv = (None, None)
    if y is not None:
        table, iv = _woe_table(codes, y, edges, float(eps))
    return Binning(method=method, edges=edges, codes=codes, table=table, iv=iv)
