"""CSV tables: one row per sample, numeric feature columns and a label column; optional binning of columns."""

from __future__ import annotations

import csv as _csv
import dataclasses
import difflib
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from trickbag.data.sources.memory import tensor_splits
from trickbag.data.sources.splits import DataSplits
from trickbag.errors import DataError

__all__ = ["csv_table"]


def csv_table(cfg: Any) -> DataSplits:
    if not cfg.root:
        raise DataError("data.root must name a CSV file for data.name=csv")
    path = Path(cfg.root)
    if not path.is_file():
        raise DataError(f"data.root={cfg.root!r}: CSV file does not exist")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(_csv.reader(fh))
    except (OSError, UnicodeDecodeError, _csv.Error) as exc:
        raise DataError(f"data.root={cfg.root!r} cannot be read as CSV: {exc}") from None
    if len(rows) < 2:
        raise DataError(f"data.root={cfg.root!r} has no data rows (a header and at least one row expected)")
    header = [h.strip() for h in rows[0]]
    if cfg.label_column not in header:
        raise DataError(
            f"data.label_column={cfg.label_column!r} is not a column of {cfg.root!r}; columns: {', '.join(header)}"
        )
    li = header.index(cfg.label_column)
    feats = cfg.feature_columns or [h for h in header if h != cfg.label_column]
    missing = [f for f in feats if f not in header]
    if missing:
        raise DataError(f"data.feature_columns {missing} are not columns of {cfg.root!r}; columns: {', '.join(header)}")
    fi = [header.index(f) for f in feats]
    for name in cfg.bins:
        if name not in feats:
            close = difflib.get_close_matches(name, feats, n=1)
            what = "the label column" if name == cfg.label_column else "not a feature column"
            hint = f" (did you mean {close[0]!r}?)" if close and name != cfg.label_column else ""
            raise DataError(
                f"data.bins names {name!r}, which is {what} of {cfg.root!r}{hint}; feature columns: {', '.join(feats)}"
            )
    binned = {feats.index(name) for name in cfg.bins}  # these may hold empty / NaN cells (own indicator)
    xs, labels = [], []
    for r, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise DataError(f"{cfg.root!r} line {r}: {len(row)} fields, expected {len(header)}")
        try:
            vals = [math.nan if j in binned and not row[i].strip() else float(row[i]) for j, i in enumerate(fi)]
        except ValueError:
            raise DataError(f"{cfg.root!r} line {r}: a feature is not a number: {[row[i] for i in fi]}") from None
        bad_j = next((j for j, v in enumerate(vals) if math.isinf(v) or (math.isnan(v) and j not in binned)), None)
        if bad_j is not None:
            raise DataError(
                f"{cfg.root!r} line {r}: feature {feats[bad_j]!r} is NaN or infinite; clean or impute it first"
            )
        xs.append(vals)
        labels.append(row[li].strip())
    if all(_is_int(v) for v in labels):
        ints = [int(v) for v in labels]
        if min(ints) < 0:
            raise DataError(f"{cfg.root!r}: label {min(ints)} is out of range; integer labels must be >= 0")
        if cfg.num_classes is not None and max(ints) >= cfg.num_classes:
            raise DataError(
                f"{cfg.root!r}: label {max(ints)} is out of range for data.num_classes={cfg.num_classes}"
            )
        classes = [str(i) for i in range(max(ints) + 1)]
        y = torch.tensor(ints)
    else:
        classes = sorted(set(labels))
        y = torch.tensor([classes.index(v) for v in labels])
    if len(set(y.tolist())) < 2:
        raise DataError(f"{cfg.root!r}: the label column has fewer than 2 classes")
    x = torch.tensor(xs, dtype=torch.float32).unsqueeze(1)  # [N, 1, F]
    encode = _bin_columns(x, y, cfg, feats) if cfg.bins else None
    # columns have their own units: standardise each one with its training mean and std
    splits = tensor_splits(x, y, cfg, augment=None, classes=classes, encode=encode, per_feature=True)
    splits.kind = "tabular"
    return splits


def _bin_columns(
    x: torch.Tensor, y: torch.Tensor, cfg: Any, feats: list[str]
) -> Callable[[np.ndarray], Callable[[torch.Tensor], torch.Tensor]]:
    """``data.bins``: fit each column's edges on the training rows, then one-hot the bin codes of every row.

    ``x``: ``[N, 1, F]`` raw features (NaN allowed in binned columns), ``y``: ``[N]`` class indices.
    Returns ``encode(train_rows)`` for :func:`_tensor_splits`; its transform maps ``[n, 1, F]`` to
    ``[n, 1, F']``, each binned column replaced in place by ``n_bins + 1`` indicators: one per bin of
    ``trickbag.tabular.Binning.transform`` (values outside the training range go to the first or
    last bin) and a last one for a missing value.  ``method: tree`` splits on the label with a
    ``DecisionTreeClassifier(max_leaf_nodes=n_bins)``, which handles any number of classes.
    """
    from torch.nn.functional import one_hot

    from trickbag import tabular

    columns = {feats.index(name): (name, spec) for name, spec in cfg.bins.items()}

    def encode(train_rows: np.ndarray) -> Callable[[torch.Tensor], torch.Tensor]:
        fitted: dict[int, tabular.Binning] = {}
        y_tr = y[train_rows].numpy()
        for j, (name, spec) in columns.items():
            v = x[train_rows, 0, j].double().numpy()
            known = ~np.isnan(v)
            if not known.any():
                raise DataError(
                    f"data.bins: column {name!r} of {cfg.root!r} has no value in the training split; fill it in or "
                    "remove it from data.bins"
                )
            if spec.method == "tree":  # tabular.bin_feature(target=) takes a binary label only (for WoE)
                edges = tabular._tree_edges(v[known], y_tr[known], spec.n_bins, 1, 0)
                b = tabular.Binning("tree", edges, codes=np.empty(0, dtype=np.int64))
                fitted[j] = dataclasses.replace(b, codes=b.transform(v))
            else:
                fitted[j] = tabular.bin_feature(v, spec.method, spec.n_bins)

        def transform(t: torch.Tensor) -> torch.Tensor:
            parts = []
            for j in range(t.shape[-1]):
                col = t[:, 0, j]
                if j in fitted:
                    codes = torch.from_numpy(fitted[j].transform(col.double().numpy()))
                    parts.append(one_hot(codes, fitted[j].n_bins + 1).to(t.dtype))
                else:
                    parts.append(col[:, None])
            return torch.cat(parts, dim=1).unsqueeze(1)

        return transform

    return encode


def _is_int(v: str) -> bool:
    try:
        int(v)
        return True
    except ValueError:
        return False
