"""Tabular helpers: bin a numeric feature (equal width, quantile or decision tree; from
:mod:`trickbag.data.binning`) and plot correlations."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from trickbag._optional import require
from trickbag.data.binning import Binning, bin_feature

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Binning", "bin_feature", "correlation_heatmap"]


def _draw_heatmap(corr: pd.DataFrame, *, digits: int, title: str | None):
    # A bare Figure renders with Agg and leaves pyplot's global backend untouched.
    from matplotlib.figure import Figure

    k = len(corr.columns)
    size = max(3.0, 0.6 * k + 1.5)
    fig = Figure(figsize=(size + 1.0, size))
    ax = fig.add_subplot()
    values = corr.to_numpy(dtype=np.float64)
    image = ax.imshow(values, cmap="coolwarm", vmin=-1.0, vmax=1.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xticks(range(k), labels=[str(c) for c in corr.columns], rotation=45, ha="right")
    ax.set_yticks(range(k), labels=[str(c) for c in corr.index])
    for i in range(k):
        for j in range(k):
            v = values[i, j]
            text = "nan" if math.isnan(v) else f"{v:.{digits}f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if abs(v) > 0.6 else "black")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def correlation_heatmap(
    frame: pd.DataFrame,
    path: str | os.PathLike[str],
    method: Literal["pearson", "spearman", "kendall"] = "pearson",
    *,
    digits: int = 2,
    title: str | None = None,
) -> Path:
    """Write a PNG heat map of ``frame.corr(method)`` over its numeric columns, each cell annotated.

    Uses pandas' ``DataFrame.corr`` (Pearson, Spearman or Kendall) on the numeric columns
    and matplotlib's Agg backend; the colour scale is fixed to ``[-1, 1]``.  Returns
    the path written.

    >>> import pandas as pd, tempfile, os
    >>> df = pd.DataFrame({"a": [1, 2, 3, 4], "b": [2, 4, 6, 8], "c": [4, 1, 3, 2]})
    >>> out = correlation_heatmap(df, os.path.join(tempfile.mkdtemp(), "corr.png"))
    >>> out.read_bytes()[:4] == b"\\x89PNG"
    True
    """
    pd = require("pandas", extra="tabular")
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    if method not in ("pearson", "spearman", "kendall"):
        raise ValueError(f"method must be 'pearson', 'spearman' or 'kendall', got {method!r}")
    if isinstance(digits, bool) or not isinstance(digits, int) or not 0 <= digits <= 6:
        raise ValueError(f"digits must be an int in 0..6, got {digits!r}")
    numeric = frame.select_dtypes(include="number")
    if numeric.shape[1] < 2:
        raise ValueError(
            f"frame needs at least 2 numeric columns for a correlation heat map, got {list(numeric.columns)}"
        )
    corr = numeric.corr(method=method)
    fig = _draw_heatmap(corr, digits=digits, title=title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=100)
    return out
