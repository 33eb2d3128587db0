"""The simple baseline a table's run is compared with in its summary.

For a CSV run (``data.name=csv``: classification or regression), a linear model is fitted with scikit-learn on
the run's own training rows, as the run's data source prepared them (encoded and standardised with the training
statistics), and scored on the run's test rows with the run's first test metric: least squares for regression
(R², in the target's units), logistic regression for classification (accuracy). A run that does not beat it
learns less than a straight line does. It is skipped above :data:`MAX_ROWS` training rows (and said so), and
when scikit-learn is missing. ``benchmarks/tabular.py`` makes the same comparison over several splits and seeds.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import torch

__all__ = ["Baseline", "MAX_ROWS", "table_baseline", "baseline_line"]

#: above this many training rows the baseline is not fitted (its cost would show)
MAX_ROWS = 200_000


@dataclasses.dataclass
class Baseline:
    """What the baseline scored (``value`` of ``metric`` on the test rows), or why it was not fitted (``skipped``)."""

    model: str
    metric: str = ""
    value: float | None = None
    skipped: str = ""


def _rows(ds: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if hasattr(ds, "x") and hasattr(ds, "y"):  # the in-memory tables (TensorDataset, maybe behind BatchGather)
        x, y = ds.x, ds.y
    else:
        xs, ys = zip(*(ds[i] for i in range(len(ds))))
        x, y = torch.stack(xs), torch.stack([torch.as_tensor(v) for v in ys])
    return x.reshape(len(x), -1).double(), y


def table_baseline(data: Any, task: Any) -> Baseline | None:
    """The linear baseline of a table's run (``data``: its :class:`~trickbag.data.sources.splits.DataSplits`,
    ``task``: its task), or None when there is none to fit (not a table, no test rows, a multi-label task)."""
    kind = getattr(task, "name", "")
    if getattr(data, "kind", "") != "tabular" or data.test is None or kind not in ("classification", "regression"):
        return None
    model = "least squares" if kind == "regression" else "logistic regression"
    n = len(data.train)
    if n > MAX_ROWS:
        return Baseline(model, skipped=f"{n:,} training rows, above {MAX_ROWS:,}")
    try:
        from sklearn.linear_model import LinearRegression, LogisticRegression
    except ImportError:
        return Baseline(model, skipped="scikit-learn is not installed (pip install scikit-learn)")
    (x, y), (xt, yt) = _rows(data.train), _rows(data.test)
    if not (torch.isfinite(x).all() and torch.isfinite(xt).all()):
        return Baseline(model, skipped="the inputs hold non-finite values")
    if kind == "regression":
        import torchmetrics.functional as M

        fit = LinearRegression().fit(x.numpy(), y.reshape(len(y), -1).double().numpy())
        pred = torch.as_tensor(fit.predict(xt.numpy())).reshape(len(yt), -1)
        target = yt.reshape(len(yt), -1).double()
        pred, target = task.to_units(pred), task.to_units(target)  # R² as the run reports it, in the data's units
        if pred.shape[1] == 1:
            pred, target = pred[:, 0], target[:, 0]
        r2 = M.r2_score(pred.float(), target.float(), multioutput="uniform_average")
        return Baseline(model, "r2", float(r2))
    y = y.long()
    if len(torch.unique(y)) < 2:
        return Baseline(model, skipped="the training rows hold one class")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: the fit after max_iter is still a fair baseline
        fit = LogisticRegression(max_iter=1000).fit(x.numpy(), y.numpy())
    acc = (torch.as_tensor(fit.predict(xt.numpy())) == yt.long()).double().mean()
    return Baseline(model, "acc", float(acc))


def baseline_line(b: Baseline | None, test: dict[str, Any]) -> str | None:
    """The summary's line: ``baseline   logistic regression on the same split: test acc 0.9770 (this run
    0.9730)``, or why it was skipped; None without a baseline.

    >>> baseline_line(Baseline("least squares", "r2", 0.3301), {"test/r2": 0.4187})
    'baseline   least squares on the same split: test r2 0.3301 (this run 0.4187)'
    >>> baseline_line(Baseline("logistic regression", skipped="250,000 training rows, above 200,000"), {})
    'baseline   logistic regression not fitted: 250,000 training rows, above 200,000'
    """
    if b is None:
        return None
    if b.skipped or b.value is None:
        return f"baseline   {b.model} not fitted: {b.skipped}"
    mine = test.get(f"test/{b.metric}")
    this = f" (this run {mine:.4f})" if isinstance(mine, float) else ""
    return f"baseline   {b.model} on the same split: test {b.metric} {b.value:.4f}{this}"
