"""CSV tables: one row per sample, feature columns and label column(s); optional binning of columns.

Features: a column of numbers is used as it is (standardised with the training split's mean and std);
a column holding text is a category, one-hot encoded (its values in the file, plus one slot for a
missing or unseen value; at most :data:`MAX_CATEGORIES` values, else it is refused, naming it); an
empty cell or ``NA``/``N/A``/``nan``/``null``/``?``/``-`` in a numeric column is a missing value,
filled with the column's training mean, and a column that has any gets a 0/1 "missing" indicator
beside it. Every encoding is fitted on the training rows only. The delimiter (``,``, ``;``, tab or
``|``) is detected from the header line.

The task decides what the label columns hold (``task.type``):

* ``classification`` — one column of class names or integer class indices (>= 0);
* ``multilabel`` — several columns (``data.label_column: [a, b, c]``) of 0/1;
* ``regression`` — one or more numeric columns, standardised with the training split's mean and std.

A numeric label column with many distinct values (non-integers, or more than 20 distinct values making
up over a fifth of the rows) is refused for classification unless ``task.type`` is set explicitly: it
is almost always a regression target, and 539 classes of one sample each train to accuracy 0.
"""

from __future__ import annotations

import csv as _csv
import dataclasses
import difflib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trickbag.data.sources.memory import tensor_splits
from trickbag.data.sources.splits import DataSplits
from trickbag.errors import DataError

__all__ = ["csv_table", "looks_continuous", "MAX_CATEGORIES"]

#: a text feature column with more distinct values than this (or, past 10, more than half the rows) is not a category
MAX_CATEGORIES = 50
#: cells that mean "no value" in a numeric column (compared in lower case, after stripping)
MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "?", "-"})


def _read(cfg: Any) -> tuple[list[str], list[list[str]]]:
    """(header, data rows) of ``data.root``; a UTF-8 BOM (as Excel writes it) is not part of the header."""
    if not cfg.root:
        raise DataError("data.root must name a CSV file for data.name=csv")
    path = Path(cfg.root).expanduser()
    if not path.is_file():
        raise DataError(f"data.root={cfg.root!r}: CSV file does not exist")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            first = fh.readline()
            fh.seek(0)
            if first.startswith("\ufeff"):  # utf-8-sig strips it on read(), not on seek(0) + read again
                fh.read(1)
            rows = list(_csv.reader(fh, delimiter=_delimiter(first)))
    except (OSError, UnicodeDecodeError, _csv.Error) as exc:
        raise DataError(f"data.root={cfg.root!r} cannot be read as CSV: {exc}") from None
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if len(rows) < 2:
        raise DataError(f"data.root={cfg.root!r} has no data rows (a header and at least one row expected)")
    return [h.strip() for h in rows[0]], rows[1:]


def _delimiter(header_line: str) -> str:
    """The header line's most frequent of ``,`` ``;`` tab ``|`` (``,`` when none occurs).

    >>> _delimiter("a;b;label"), _delimiter("a,b"), _delimiter("x")
    (';', ',', ',')
    """
    counts = {d: header_line.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _columns(cfg: Any, header: list[str]) -> tuple[list[str], list[str]]:
    """(label columns, feature columns), checked against the header and ``data.bins``."""
    labels = [cfg.label_column] if isinstance(cfg.label_column, str) else list(cfg.label_column)
    unknown = [c for c in labels if c not in header]
    if unknown:
        raise DataError(
            f"data.label_column={unknown[0]!r} is not a column of {cfg.root!r}; columns: {', '.join(header)}"
        )
    feats = cfg.feature_columns or [h for h in header if h not in labels]
    missing = [f for f in feats if f not in header]
    if missing:
        raise DataError(f"data.feature_columns {missing} are not columns of {cfg.root!r}; columns: {', '.join(header)}")
    if not feats:
        raise DataError(f"{cfg.root!r} has no feature column besides the label column(s) {labels}; "
                        "a table needs at least one input column")
    for name in cfg.bins:
        if name not in feats:
            close = difflib.get_close_matches(name, feats, n=1)
            what = "the label column" if name in labels else "not a feature column"
            hint = f" (did you mean {close[0]!r}?)" if close and name not in labels else ""
            raise DataError(
                f"data.bins names {name!r}, which is {what} of {cfg.root!r}{hint}; feature columns: {', '.join(feats)}"
            )
    return labels, feats


def _is_number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _vocabularies(cfg: Any, header: list[str], rows: list[list[str]], feats: list[str]) -> dict[int, list[str]]:
    """Text feature columns (a cell that is neither a number nor a missing value) -> their sorted values."""
    vocab: dict[int, list[str]] = {}
    for j, name in enumerate(feats):
        i = header.index(name)
        cells = [row[i].strip() for row in rows if len(row) == len(header)]
        text = sorted({c for c in cells if c.lower() not in MISSING and not _is_number(c)})
        if not text:
            continue
        if name in cfg.bins:
            raise DataError(f"data.bins names {name!r}, a text column of {cfg.root!r} (e.g. {text[0]!r}); bins are "
                            "for numeric columns")
        values = sorted({c for c in cells if c.lower() not in MISSING})
        if len(values) > MAX_CATEGORIES or (len(values) > 10 and len(values) > len(rows) / 2):  # names, ids
            others = [f for f in feats if f != name]
            raise DataError(
                f"feature column {name!r} of {cfg.root!r} holds text with {len(values)} distinct values (e.g. "
                f"{text[0]!r}): too many to one-hot as categories (at most {MAX_CATEGORIES}, and not one per row "
                f"like a name or an id); leave it out: data.feature_columns=[{', '.join(others)}]"
            )
        vocab[j] = values
    return vocab


def _cell(cfg: Any, r: int, name: str, cell: str, codes: dict[str, int] | None) -> float:
    """One feature cell: a category's code, a number, or NaN (missing; an unseen category)."""
    if codes is not None:
        return float(codes[cell]) if cell in codes else math.nan
    if cell.lower() in MISSING:
        return math.nan
    try:
        v = float(cell)
    except ValueError:
        raise DataError(f"{cfg.root!r} line {r}: column {name!r} holds {cell!r}; it is a numeric column (numbers "
                        "or an empty cell)") from None
    if math.isinf(v):
        raise DataError(f"{cfg.root!r} line {r}: feature {name!r} is infinite; clean it or leave the cell empty")
    return v


def _features(cfg: Any, header: list[str], rows: list[list[str]], feats: list[str],
              vocab: dict[int, list[str]]) -> torch.Tensor:
    """``[N, 1, F]`` raw features: numbers, category codes (see :func:`_vocabularies`), NaN where missing."""
    fi = [header.index(f) for f in feats]
    codes = {j: {v: k for k, v in enumerate(values)} for j, values in vocab.items()}
    xs = []
    for r, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise DataError(f"{cfg.root!r} line {r}: {len(row)} fields, expected {len(header)}")
        xs.append([_cell(cfg, r, feats[j], row[i].strip(), codes.get(j)) for j, i in enumerate(fi)])
    return torch.tensor(xs, dtype=torch.float32).unsqueeze(1)


def looks_continuous(values: list[str]) -> str | None:
    """Why a label column looks like a regression target (numbers, many distinct values), or None.

    >>> looks_continuous(["1.5", "2.25", "3.0"]) is not None, looks_continuous(["cat", "dog"])
    (True, None)
    """
    try:
        numbers = [float(v) for v in values]
    except ValueError:
        return None
    distinct = sorted(set(numbers))
    if any(not v.is_integer() for v in numbers):
        return f"holds {len(distinct)} distinct numbers, not whole ones (e.g. {distinct[0]:g}, {distinct[-1]:g})"
    if len(distinct) > 20 and len(distinct) > 0.2 * len(numbers):
        return (
            f"holds {len(distinct)} distinct numbers in {len(numbers)} rows (from {distinct[0]:g} to {distinct[-1]:g})"
        )
    return None


def _class_targets(cfg: Any, column: str, values: list[str], explicit: bool) -> tuple[torch.Tensor, list[str]]:
    why = None if explicit else looks_continuous(values)
    if why:
        raise DataError(f"data.label_column={column!r} {why}: a continuous target; set task.type=regression to "
                        "predict the number, or task.type=classification to treat each value as a class")
    if all(_is_int(v) for v in values):
        ints = [int(v) for v in values]
        if min(ints) < 0:
            raise DataError(f"{cfg.root!r}: label {min(ints)} is out of range; integer labels must be >= 0")
        if cfg.num_classes is not None and max(ints) >= cfg.num_classes:
            raise DataError(f"{cfg.root!r}: label {max(ints)} is out of range for data.num_classes={cfg.num_classes}")
        classes, y = [str(i) for i in range(max(ints) + 1)], torch.tensor(ints)
    else:
        classes = sorted(set(values))
        y = torch.tensor([classes.index(v) for v in values])
    if len(set(y.tolist())) < 2:
        raise DataError(f"{cfg.root!r}: the label column {column!r} has fewer than 2 classes")
    return y, classes


def _number_targets(cfg: Any, columns: list[str], table: list[list[str]], task: str) -> torch.Tensor:
    try:
        y = torch.tensor([[float(v) for v in row] for row in table], dtype=torch.float32)
    except ValueError:
        raise DataError(f"{cfg.root!r}: task.type={task} needs numbers in the label column(s) {columns}") from None
    if not torch.isfinite(y).all():
        raise DataError(f"{cfg.root!r}: a label in {columns} is NaN or infinite; clean the targets first")
    if task == "multilabel" and not ((y == 0) | (y == 1)).all():
        raise DataError(f"{cfg.root!r}: task.type=multilabel needs 0/1 label columns; {columns} hold other values")
    return y


def csv_table(cfg: Any, task: Any = None) -> DataSplits:
    """A CSV table as train / val / test tensors; see the module docstring for the label columns."""
    kind = getattr(task, "type", "classification")
    explicit = task is not None and "type" in task.model_fields_set
    header, rows = _read(cfg)
    labels, feats = _columns(cfg, header)
    vocab = _vocabularies(cfg, header, rows, feats)
    x = _features(cfg, header, rows, feats, vocab)
    table = [[row[header.index(c)].strip() for c in labels] for row in rows]
    if kind == "classification":
        if len(labels) != 1:
            raise DataError(f"data.label_column lists {len(labels)} columns; classification takes one "
                            "(task.type=multilabel for several 0/1 columns, regression for several numbers)")
        y, classes = _class_targets(cfg, labels[0], [t[0] for t in table], explicit)
    else:
        y, classes = _number_targets(cfg, labels, table, kind), labels
        if any(spec.method == "tree" for spec in cfg.bins.values()):
            raise DataError("data.bins method 'tree' splits on class labels; with task.type="
                            f"{kind} use method width or quantile")
    encode = _encoder(x, y, cfg, feats, vocab)
    # columns have their own units: standardise each one with its training mean and std
    splits = tensor_splits(x, y, cfg, augment=None, classes=classes, encode=encode, per_feature=True,
                           standardise_targets=kind == "regression")
    splits.kind = "tabular"
    splits.read_rows = lambda head, body: _features(cfg, [h.strip() for h in head], body, feats, vocab)
    return splits


def _fit_bins(x: torch.Tensor, y: torch.Tensor, cfg: Any, feats: list[str], train_rows: np.ndarray) -> dict[int, Any]:
    """``data.bins``: each binned column's :class:`~trickbag.data.binning.Binning`, fitted on the training rows.

    ``method: tree`` splits on the label with a ``DecisionTreeClassifier(max_leaf_nodes=n_bins)``, which
    handles any number of classes.
    """
    from trickbag.data import binning

    fitted: dict[int, Any] = {}
    y_tr = y[train_rows].numpy()
    for name, spec in cfg.bins.items():
        j = feats.index(name)
        v = x[train_rows, 0, j].double().numpy()
        known = ~np.isnan(v)
        if not known.any():
            raise DataError(f"data.bins: column {name!r} of {cfg.root!r} has no value in the training split; fill it "
                            "in or remove it from data.bins")
        if spec.method == "tree":  # binning.bin_feature(target=) takes a binary label only (for WoE)
            edges = binning._tree_edges(v[known], y_tr[known], spec.n_bins, 1, 0)
            b = binning.Binning("tree", edges, codes=np.empty(0, dtype=np.int64))
            fitted[j] = dataclasses.replace(b, codes=b.transform(v))
        else:
            fitted[j] = binning.bin_feature(v, spec.method, spec.n_bins)
    return fitted


def _encoder(
    x: torch.Tensor, y: torch.Tensor, cfg: Any, feats: list[str], vocab: dict[int, list[str]]
) -> Callable[[np.ndarray], Callable[[torch.Tensor], torch.Tensor]]:
    """``encode(train_rows)`` for :func:`tensor_splits`: a transform of ``[n, 1, F]`` raw features to
    ``[n, 1, F']``, fitted on the training rows. Column by column: a binned column becomes ``n_bins + 1``
    indicators (one per bin of ``Binning.transform``, values outside the training range in the first or
    last bin, and one for a missing value); a text column one indicator per category plus one for a
    missing or unseen value; a numeric column its value, missing ones filled with the training mean, and
    with a 0/1 missing indicator after it when the file has a missing value in it."""
    from torch.nn.functional import one_hot

    flagged = {j for j in range(len(feats)) if j not in vocab and torch.isnan(x[:, 0, j]).any()}

    def encode(train_rows: np.ndarray) -> Callable[[torch.Tensor], torch.Tensor]:
        bins = _fit_bins(x, y, cfg, feats, train_rows)
        tr = x[train_rows, 0]
        fill = {j: float(tr[:, j].nanmean()) if not torch.isnan(tr[:, j]).all() else 0.0 for j in range(len(feats))}

        def transform(t: torch.Tensor) -> torch.Tensor:
            parts = []
            for j in range(t.shape[-1]):
                col = t[:, 0, j]
                if j in bins:
                    codes = torch.from_numpy(bins[j].transform(col.double().numpy()))
                    parts.append(one_hot(codes, bins[j].n_bins + 1).to(t.dtype))
                elif j in vocab:
                    codes = torch.where(torch.isnan(col), float(len(vocab[j])), col).long()
                    parts.append(one_hot(codes, len(vocab[j]) + 1).to(t.dtype))
                else:
                    missing = torch.isnan(col)
                    parts.append(torch.where(missing, fill[j], col)[:, None])
                    if j in flagged:
                        parts.append(missing.to(t.dtype)[:, None])
            return torch.cat(parts, dim=1).unsqueeze(1)

        return transform

    return encode


def _is_int(v: str) -> bool:
    try:
        int(v)
        return True
    except ValueError:
        return False
