"""CSV tables: one row per sample, feature columns and label column(s); optional binning of columns.

Features: a column of numbers is used as it is (standardised with the training split's mean and std);
a column holding text is a category, one-hot encoded (its values in the file, plus one slot for a
missing or unseen value; at most :data:`MAX_CATEGORIES` values, else it is refused, naming it); an
empty cell or ``NA``/``N/A``/``nan``/``null``/``?``/``-`` in a numeric column is a missing value,
filled with the column's training mean, and a column that has any gets a 0/1 "missing" indicator
beside it. A column of ISO dates (``2024-03-05``, ``2024/03/05``, optionally with a time) becomes four
numbers: days since 1970-01-01, month, day of the week (Monday 0) and day of the year. Every encoding
is fitted on the training rows only, once: it is stored in the run's checkpoints as plain data
(:mod:`~trickbag.data.sources.table_state`) and reused by predict, eval and a resume, never re-fitted
from the file. The delimiter (``,``, ``;``, tab or ``|``) is detected from the header line.

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
import difflib
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trickbag.data.sources.memory import tensor_splits
from trickbag.data.sources.splits import DataSplits
from trickbag.data.sources.table_state import DATE_PARTS, MISSING, TableEncoder, is_date, read_cells
from trickbag.errors import DataError

__all__ = ["csv_table", "looks_continuous", "MAX_CATEGORIES"]

#: a text feature column with more distinct values than this (or, past 10, more than half the rows) is not a category
MAX_CATEGORIES = 50


def read_csv(path: str | Path, what: str) -> tuple[list[str], list[list[str]]]:
    """(header, data rows) of a CSV file; ``what`` names it in errors (e.g. ``data.root='t.csv'``).

    The delimiter is detected from the header line (:func:`_delimiter`); a UTF-8 BOM (as Excel writes
    it) is not part of the header; blank lines are skipped.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{what}: CSV file does not exist")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            first = fh.readline()
            fh.seek(0)
            if first.startswith("\ufeff"):  # utf-8-sig strips it on read(), not on seek(0) + read again
                fh.read(1)
            rows = list(_csv.reader(fh, delimiter=_delimiter(first)))
    except (OSError, UnicodeDecodeError, _csv.Error) as exc:
        raise DataError(f"{what} cannot be read as CSV: {exc}") from None
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if len(rows) < 2:
        raise DataError(f"{what} has no data rows (a header and at least one row expected)")
    return [h.strip() for h in rows[0]], rows[1:]


def _read(cfg: Any) -> tuple[list[str], list[list[str]]]:
    """(header, data rows) of ``data.root``."""
    if not cfg.root:
        raise DataError("data.root must name a CSV file for data.name=csv")
    return read_csv(cfg.root, f"data.root={cfg.root!r}")


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


def _text_problem(cfg: Any, name: str, values: list[str], text: list[str], n_rows: int) -> str | None:
    """Why a text feature column cannot be used as a category (bins on it, too many values), or None."""
    if name in cfg.bins:
        return f"data.bins names {name!r}, a text column (e.g. {text[0]!r}); bins are for numeric columns"
    if len(values) > MAX_CATEGORIES or (len(values) > 10 and len(values) > n_rows / 2):  # names, ids
        return (f"feature column {name!r} holds text with {len(values)} distinct values (e.g. {text[0]!r}): too many "
                f"to one-hot as categories (at most {MAX_CATEGORIES}, and not one per row like a name or an id)")
    return None


def _column_specs(cfg: Any, header: list[str], rows: list[list[str]], feats: list[str]) -> list[dict[str, Any]]:
    """The raw columns of the feature columns (:mod:`~trickbag.data.sources.table_state`): a column of numbers
    is a number, one of ISO dates becomes :data:`DATE_PARTS` numbers, any other text a category (its
    sorted values). Every column that cannot be used is named in one :class:`DataError`."""
    specs: list[dict[str, Any]] = []
    problems, bad = [], []
    for name in feats:
        i = header.index(name)
        cells = [row[i].strip() for row in rows if len(row) == len(header)]
        known = [c for c in cells if c.lower() not in MISSING]
        text = sorted({c for c in known if not _is_number(c)})
        number = {"column": name, "type": "number", "part": None, "fill": 0.0, "missing_flag": False, "bins": None}
        if not text:
            specs.append({"name": name, **number})
        elif all(is_date(c) for c in known):
            if name in cfg.bins:
                problems.append(f"data.bins names {name!r}, a date column; bins are for numeric columns")
                bad.append(name)
            specs += [{**number, "name": f"{name}.{part}", "part": part} for part in DATE_PARTS]
        else:
            values = sorted(set(known))
            why = _text_problem(cfg, name, values, text, len(rows))
            if why:
                problems.append(why)
                bad.append(name)
            specs.append({"name": name, "column": name, "type": "category", "categories": values})
    if problems:
        keep = [f for f in feats if f not in bad]
        fix = f"; leave {'it' if len(bad) == 1 else 'them'} out: data.feature_columns=[{', '.join(keep)}]" if keep \
            else ""
        raise DataError(f"data.root={cfg.root!r}: " + "; ".join(problems) + fix)
    return specs


def looks_continuous(values: list[str]) -> str | None:
    """Why a label column looks like a regression target (numbers, many distinct values), or None.

    >>> looks_continuous(["1.5", "2.25", "3.0"]) is not None, looks_continuous(["cat", "dog"])
    (True, None)
    """
    looks = {m.lower() for m in LOOKS_MISSING} | {""}
    marked = [v for v in values if v.strip().lower() in looks]
    try:
        numbers = [float(v) for v in values if v.strip().lower() not in looks]
    except ValueError:
        return None
    if not numbers:
        return None
    distinct = sorted(set(numbers))
    also = f" and {len(marked)} missing marks ({', '.join(sorted(set(map(repr, marked))))})" if marked else ""
    if any(not v.is_integer() for v in numbers):
        return (f"holds {len(distinct)} distinct numbers, not whole ones (e.g. {distinct[0]:g}, {distinct[-1]:g})"
                f"{also}")
    if len(distinct) > 20 and len(distinct) > 0.2 * len(numbers):
        return (f"holds {len(distinct)} distinct numbers in {len(numbers)} rows (from {distinct[0]:g} to "
                f"{distinct[-1]:g}){also}")
    return None


#: label values that look like a missing label; a classification column holding one is named at run start
LOOKS_MISSING = ("NA", "N/A", "NaN", "null", "None", "?")


def missing_marks(cfg: Any, kind: str) -> frozenset[str]:
    """The label cells that mean "no label" (lower case, compared after stripping): ``data.missing_labels``, or
    by default an empty cell, and for numbers (regression, multilabel) also ``NA``, ``N/A``, ``NaN``, ``null``, ...

    >>> from types import SimpleNamespace as NS
    >>> default = NS(missing_labels=None)
    >>> sorted(missing_marks(default, "classification")), "nan" in missing_marks(default, "regression")
    ([''], True)
    >>> sorted(missing_marks(NS(missing_labels=["NA", " ? "]), "classification"))
    ['?', 'na']
    """
    given = getattr(cfg, "missing_labels", None)
    if given is not None:
        return frozenset(str(m).strip().lower() for m in given)
    return frozenset({""}) if kind == "classification" else MISSING


def _lines(rows: list[int]) -> str:
    shown = ", ".join(str(r + 2) for r in rows[:5])  # + 2: the header is line 1
    return f"line{'s' if len(rows) > 1 else ''} {shown}{', ...' if len(rows) > 5 else ''}"


def drop_unlabelled(cfg: Any, kind: str, labels: list[str], width: int, rows: list[list[str]],
                    table: list[list[str]]) -> tuple[list[list[str]], list[list[str]], list[str]]:
    """The rows (and label cells) that have a label; with ``data.drop_unlabelled`` the others are left out and
    a note says how many; without it, one line naming their count and the key to set."""
    marks = missing_marks(cfg, kind)
    # a ragged row is not unlabelled: read_cells refuses it, naming its line
    gone = [i for i, t in enumerate(table) if len(rows[i]) == width and any(c.lower() in marks for c in t)]
    if not gone:
        return rows, table, []
    cols = ", ".join(map(repr, labels))
    given = getattr(cfg, "missing_labels", None)
    shown = ", ".join(repr(str(m).strip()) if str(m).strip() else "empty" for m in given) if given is not None else (
        "empty" if kind == "classification" else "empty, NA, N/A, NaN, null, None, ?, - (the default)")
    n, left = len(rows), len(rows) - len(gone)
    if not getattr(cfg, "drop_unlabelled", False) or left == 0:
        fix = (f"set data.drop_unlabelled=true to train on the {left} labelled rows, or fill them in" if left
               else "every row lacks its label: give the file with its labels")
        raise DataError(f"data.root={cfg.root!r}: the label column {cols} has no label on {len(gone)} of {n} rows "
                        f"({_lines(gone)}; data.missing_labels: {shown}); {fix}")
    keep = sorted(set(range(n)) - set(gone))
    note = (f"data.drop_unlabelled: {len(gone)} of {n} rows have no label in {cols} ({_lines(gone)}): "
            f"left out, trained on the other {left}")
    return [rows[i] for i in keep], [table[i] for i in keep], [note]


def name_missing_looking_labels(cfg: Any, kind: str, column: str, values: list[str]) -> list[str]:
    """A note naming class labels that look like a missing mark (``NA``, ``?``, ...), trained as a class of their
    own, with the keys that leave those rows out; none when ``data.missing_labels`` is given."""
    if kind != "classification" or getattr(cfg, "missing_labels", None) is not None:
        return []
    looks = {m.lower() for m in LOOKS_MISSING}
    found = sorted({v for v in values if v.lower() in looks})
    if not found:
        return []
    counts = ", ".join(f"{v!r} in {sum(x == v for x in values)} rows" for v in found)
    return [f"data.label_column={column!r} holds {counts}, which looks like a missing label; it is trained as a "
            f"class of its own (to leave those rows out: data.missing_labels=[{', '.join(found)}] "
            "data.drop_unlabelled=true)"]


def _check_labels_present(where: str, labels: list[str], table: list[list[str]], kind: str) -> None:
    """One line naming the first row whose label cell is empty (any missing-value mark, for numbers)."""
    empty = {""} if kind == "classification" else MISSING
    lines = [r for r, t in enumerate(table, start=2) if any(c.lower() in empty for c in t)]
    if lines:
        more = f" (and {len(lines) - 1} more rows)" if len(lines) > 1 else ""
        cols = ", ".join(map(repr, labels))
        raise DataError(f"{where}: the label column {cols} is empty on line {lines[0]}{more}; every row needs a "
                        "label: fill it in or remove the row")


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


def stored_classes(where: str, column: str, values: list[str], classes: list[str]) -> torch.Tensor:
    """Class indices of ``values`` under a run's stored ``classes``; one line for a label the run never had."""
    index = {c: i for i, c in enumerate(classes)}
    out = []
    for r, v in enumerate(values, start=2):
        k = index.get(v)
        if k is None and _is_int(v):
            k = index.get(str(int(v)))
        if k is None:
            shown = ", ".join(classes[:10]) + (", ..." if len(classes) > 10 else "")
            raise DataError(f"{where} line {r}: label {v!r} in column {column!r} is not a class of the run "
                            f"(its classes: {shown})")
        out.append(k)
    return torch.tensor(out, dtype=torch.long)


def number_targets(where: str, columns: list[str], table: list[list[str]], task: str) -> torch.Tensor:
    """``[N, T]`` float labels of a regression or multi-label table; one line for a cell that is not a number."""
    for r, row in enumerate(table, start=2):
        for c, v in zip(columns, row):
            if not _is_number(v):
                raise DataError(f"{where}: task.type={task} needs numbers in the label column(s) {columns}; line {r} "
                                f"holds {v!r} in {c!r}")
    y = torch.tensor([[float(v) for v in row] for row in table], dtype=torch.float32)
    if not torch.isfinite(y).all():
        raise DataError(f"{where}: a label in {columns} is NaN or infinite; clean the targets first")
    if task == "multilabel" and not ((y == 0) | (y == 1)).all():
        raise DataError(f"{where}: task.type=multilabel needs 0/1 label columns; {columns} hold other values")
    return y


def label_table(header: list[str], rows: list[list[str]], labels: list[str], where: str) -> list[list[str]]:
    """The label cells of every row (stripped); one line when the file lacks a label column."""
    lacking = [c for c in labels if c not in header]
    if lacking:
        raise DataError(f"{where} lacks the label column {lacking[0]!r}; its columns: {', '.join(header)}")
    return [[row[header.index(c)].strip() if len(row) == len(header) else "" for c in labels] for row in rows]


def _targets(cfg: Any, kind: str, labels: list[str], table: list[list[str]], explicit: bool,
             fitted: dict[str, Any] | None) -> tuple[torch.Tensor, list[str]]:
    where = f"data.root={cfg.root!r}"
    _check_labels_present(where, labels, table, kind)
    if kind != "classification":
        return number_targets(where, labels, table, kind), labels
    if len(labels) != 1:
        raise DataError(f"data.label_column lists {len(labels)} columns; classification takes one "
                        "(task.type=multilabel for several 0/1 columns, regression for several numbers)")
    if fitted is not None:
        return stored_classes(where, labels[0], [t[0] for t in table], fitted["classes"]), list(fitted["classes"])
    return _class_targets(cfg, labels[0], [t[0] for t in table], explicit)


def csv_table(cfg: Any, task: Any = None, fitted: dict[str, Any] | None = None) -> DataSplits:
    """A CSV table as train / val / test tensors; see the module docstring for the label columns.

    ``fitted``: a run's stored state (:attr:`DataSplits.fitted`): its columns, categories, fill values,
    bins, scaling and classes are used as they are, nothing is fitted on the file."""
    kind = getattr(task, "type", "classification")
    explicit = task is not None and "type" in task.model_fields_set
    header, rows = _read(cfg)
    all_rows, where = rows, f"data.root={cfg.root!r}"
    if fitted is None:
        labels, feats = _columns(cfg, header)
    else:
        _same_rows(cfg, fitted["table"], rows)
        labels = list(fitted["table"]["labels"])
    rows, table, notes = drop_unlabelled(cfg, kind, labels, len(header), rows,
                                         label_table(header, rows, labels, where))
    if fitted is None:  # fitted on the labelled rows the run trains on
        columns = _column_specs(cfg, header, rows, feats)
    else:
        columns = [dict(c) for c in fitted["table"]["columns"]]
    if len(labels) == 1:
        notes += name_missing_looking_labels(cfg, kind, labels[0], [t[0] for t in table])
    x = read_cells(columns, header, rows, str(cfg.root)).unsqueeze(1)
    y, classes = _targets(cfg, kind, labels, table, explicit, fitted)
    if any(spec.method == "tree" for spec in cfg.bins.values()) and kind != "classification":
        raise DataError(f"data.bins method 'tree' splits on class labels; with task.type={kind} use method width "
                        "or quantile")
    if fitted is None:
        encode, stats = _encoder(x, y, cfg, columns), None
    else:
        encoder = TableEncoder(columns)
        encode = lambda train_rows: encoder  # noqa: E731 (fitted: nothing to fit)
        t = fitted["table"]
        stats = {"mean": [t["mean"]], "std": [t["std"]], "target_mean": fitted.get("target_mean"),
                 "target_std": fitted.get("target_std")}
    # columns have their own units: standardise each one with its training mean and std
    splits = tensor_splits(x, y, cfg, augment=None, classes=classes, encode=encode, per_feature=True,
                           standardise_targets=kind == "regression", stats=stats)
    norm = (splits.fitted or {})["normalise"]
    mean, std = torch.tensor(norm["mean"]).flatten().tolist(), torch.tensor(norm["std"]).flatten().tolist()
    feats = list(dict.fromkeys(c["column"] for c in columns))
    hard = (splits.fitted or {}).get("hard")
    splits.fitted = {"source": "csv", "table": {"features": feats, "labels": labels, "columns": columns,
                                                "mean": mean, "std": std, **_fingerprint(all_rows)},
                     **({"hard": hard} if hard else {})}
    splits.notes += notes
    splits.kind = "tabular"
    splits.prepare = TableEncoder(columns, mean, std)
    splits.read_rows = lambda head, body, where: read_cells(columns, head, body, where)
    return splits


def _fingerprint(rows: list[list[str]]) -> dict[str, Any]:
    """Row count and SHA-256 of the data rows: what the run's train/val/test split was drawn from."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update("\x1f".join(row).encode("utf-8", "surrogatepass") + b"\x1e")
    return {"rows": len(rows), "sha256": digest.hexdigest()}


def _same_rows(cfg: Any, stored: dict[str, Any], rows: list[list[str]]) -> None:
    """A run's training file read again (resume, eval) must hold the rows its split was drawn from: with rows
    added or changed the split would move rows between train, val and test without a word."""
    if "sha256" not in stored:  # a checkpoint from before the fingerprint: nothing to compare
        return
    now = _fingerprint(rows)
    if now["sha256"] != stored["sha256"]:
        change = (f"{stored['rows']} rows when the run read it, {now['rows']} now" if now["rows"] != stored["rows"]
                  else f"the same {now['rows']} rows, with different cells")
        raise DataError(
            f"data.root={cfg.root!r} changed since the run read it ({change}): its train/val/test split would "
            "no longer be the run's; restore the file to resume or evaluate the run on it, score new labelled rows "
            "with `trickbag eval RUN --data FILE`, or train a new run on the new file")


def _fit_bins(x: torch.Tensor, y: torch.Tensor, cfg: Any, columns: list[dict[str, Any]],
              train_rows: np.ndarray) -> None:
    """``data.bins``: each binned column's edges (``columns[j]["bins"]``), fitted on the training rows.

    ``method: tree`` splits on the label with a ``DecisionTreeClassifier(max_leaf_nodes=n_bins)``, which
    handles any number of classes; the other methods are :func:`~trickbag.data.binning.bin_feature`'s.
    """
    from trickbag.data import binning

    y_tr = y[train_rows].numpy()
    names = [c["name"] for c in columns]
    for name, spec in cfg.bins.items():
        j = names.index(name)
        v = x[train_rows, 0, j].double().numpy()
        known = ~np.isnan(v)
        if not known.any():
            raise DataError(f"data.bins: column {name!r} of {cfg.root!r} has no value in the training split; fill it "
                            "in or remove it from data.bins")
        if spec.method == "tree":  # binning.bin_feature(target=) takes a binary label only (for WoE)
            edges = binning.tree_edges(v[known], y_tr[known], spec.n_bins, 1, 0)
        else:
            edges = binning.bin_feature(v, spec.method, spec.n_bins).edges
        columns[j]["bins"] = [float(e) for e in edges]


def _encoder(x: torch.Tensor, y: torch.Tensor, cfg: Any,
             columns: list[dict[str, Any]]) -> Callable[[np.ndarray], TableEncoder]:
    """``encode(train_rows)`` for :func:`tensor_splits`: fits the raw ``columns`` on the training rows (in
    place: the fill values, the missing indicators, the bin edges) and returns their
    :class:`~trickbag.data.sources.table_state.TableEncoder` (without scaling: ``tensor_splits`` standardises).
    A number column's missing indicator is kept when the file has a missing value in it."""

    def encode(train_rows: np.ndarray) -> TableEncoder:
        tr = x[train_rows, 0]
        for j, col in enumerate(columns):
            if col["type"] != "number":
                continue
            col["missing_flag"] = bool(torch.isnan(x[:, 0, j]).any())
            col["fill"] = float(tr[:, j].nanmean()) if not torch.isnan(tr[:, j]).all() else 0.0
        _fit_bins(x, y, cfg, columns, train_rows)
        return TableEncoder(columns)

    return encode


def _is_int(v: str) -> bool:
    try:
        int(v)
        return True
    except ValueError:
        return False
