"""A CSV table's fitted encoding as plain data, and the two halves that apply it.

The encoding is a list of *raw columns*, one dict each (stored in a run's checkpoints)::

    {"name": "a", "column": "a", "type": "number", "part": None, "fill": 0.1, "missing_flag": True, "bins": None}
    {"name": "colour", "column": "colour", "type": "category", "categories": ["blue", "green", "red"]}
    {"name": "when.days", "column": "when", "type": "number", "part": "days", ...}   # one of a date's parts

* :func:`read_cells` turns CSV cells into raw floats ``[N, R]``: a number as it is; a category its index in
  ``categories``; a date (ISO ``YYYY-MM-DD``, optionally with a time) one value per part (:data:`DATE_PARTS`);
  NaN for a missing cell or an unseen category. Every bad cell and missing column is reported in one
  :class:`DataError` naming the file.
* :class:`TableEncoder` turns raw floats into the model's input ``[N, 1, F]`` with tensor ops only (so it
  exports with the model): a number filled with its training mean where missing, a 0/1 missing indicator
  after it when the training file had gaps, or one indicator per bin (``bins``: edges; the last indicator
  for a missing value); a category one indicator per category plus one for missing/unseen; then every
  feature standardised with the training split's ``mean`` and ``std``.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any, cast

import torch

from trickbag.errors import DataError

__all__ = ["DATE_PARTS", "MISSING", "TableEncoder", "read_cells", "is_date", "encoded_width"]

#: cells that mean "no value" (compared in lower case, after stripping)
MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "?", "-"})

#: what a date column becomes: days since 1970-01-01 (with the time of day as a fraction; the trend), the
#: month 1-12, the day of the week 0-6 (Monday 0) and the day of the year 1-366 (the seasons)
DATE_PARTS = ("days", "month", "weekday", "yearday")

_DATE = re.compile(r"^\d{4}[-/]\d{2}[-/]\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}:?\d{2})?$")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _parse_date(cell: str) -> _dt.datetime | None:
    if not _DATE.match(cell):
        return None
    text = cell[:10].replace("/", "-") + cell[10:].replace("Z", "+00:00")
    if len(text) > 10 and text[-5] in "+-" and text[-3] != ":":  # +0100 -> +01:00 (Python 3.10)
        text = text[:-2] + ":" + text[-2:]
    try:
        d = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return d if d.tzinfo is not None else d.replace(tzinfo=_dt.timezone.utc)


def is_date(cell: str) -> bool:
    """Whether a cell is an ISO date (``2024-03-05``, ``2024/03/05``, optionally with a time).

    >>> is_date("2024-03-05"), is_date("2024-03-05T10:30:00Z"), is_date("05/03/2024"), is_date("2024-13-01")
    (True, True, False, False)
    """
    return _parse_date(cell) is not None


def _date_part(d: _dt.datetime, part: str) -> float:
    if part == "days":
        return (d - _EPOCH).total_seconds() / 86400.0
    if part == "month":
        return float(d.month)
    if part == "weekday":
        return float(d.weekday())
    return float(d.timetuple().tm_yday)


def _cell(col: dict[str, Any], cell: str) -> float | str:
    """One raw value, or the reason the cell does not fit the column (a string)."""
    if col["type"] == "category":
        return float(col["categories"].index(cell)) if cell in col["categories"] else math.nan
    if cell.lower() in MISSING:
        return math.nan
    if col.get("part"):
        d = _parse_date(cell)
        return _date_part(d, col["part"]) if d is not None else "a date column (YYYY-MM-DD, optionally with a time)"
    try:
        v = float(cell)
    except ValueError:
        return "a numeric column (numbers or an empty cell)"
    return v if not math.isinf(v) else "finite numbers (clean it or leave the cell empty)"


def read_cells(columns: list[dict[str, Any]], header: list[str], rows: list[list[str]], where: str,
               first_line: int = 2) -> torch.Tensor:
    """CSV rows -> raw values ``[N, R]`` (float32, NaN where missing) of the encoding's raw ``columns``.

    ``where`` names the file in the one-line :class:`DataError` that lists the missing columns or the
    bad cells (per column: its first bad value and line, and how many more there are).

    >>> cols = [{"name": "a", "column": "a", "type": "number"},
    ...         {"name": "c", "column": "c", "type": "category", "categories": ["x", "y"]}]
    >>> read_cells(cols, ["c", "a"], [["y", "1.5"], ["z", ""]], "t.csv").tolist()
    [[1.5, 1.0], [nan, nan]]
    >>> read_cells(cols, ["a"], [["1"]], "t.csv")
    Traceback (most recent call last):
    ...
    trickbag.errors.DataError: 't.csv' lacks the run's feature column 'c'; its columns: a
    """
    header = [h.strip() for h in header]
    lacking = sorted({c["column"] for c in columns if c["column"] not in header})
    if lacking:
        s = "s" if len(lacking) > 1 else ""
        raise DataError(f"{where!r} lacks the run's feature column{s} {', '.join(map(repr, lacking))}; its columns: "
                        f"{', '.join(header)}")
    index = [header.index(c["column"]) for c in columns]
    out: list[list[float]] = []
    bad: dict[str, list[Any]] = {}  # column -> [first line, first value, why, count]
    for r, row in enumerate(rows, start=first_line):
        if len(row) != len(header):
            raise DataError(f"{where!r} line {r}: {len(row)} fields, expected {len(header)}")
        values = []
        for col, i in zip(columns, index):
            v = _cell(col, row[i].strip())
            if isinstance(v, str):
                entry = bad.setdefault(col["column"], [r, row[i].strip(), v, 0])
                entry[3] += 1
                v = math.nan
            values.append(v)
        out.append(values)
    if bad:
        parts = [f"column {name!r} holds {value!r} on line {line}" + (f" (and {n - 1} more cells)" if n > 1 else "")
                 + f": {why}" for name, (line, value, why, n) in bad.items()]
        raise DataError(f"{where!r}: " + "; ".join(parts))
    return torch.tensor(out, dtype=torch.float32).reshape(len(out), len(columns))


def encoded_width(col: dict[str, Any]) -> int:
    """Model features one raw column becomes."""
    if col["type"] == "category":
        return len(col["categories"]) + 1
    if col.get("bins"):
        return len(col["bins"])  # n_bins + 1 indicators: n_bins + 1 edges
    return 2 if col.get("missing_flag") else 1


class TableEncoder(torch.nn.Module):
    """Raw values ``[N, R]`` (or ``[N, 1, R]``) -> model input ``[N, 1, F]``, as the module docstring says.

    Tensor ops only (comparisons, ``where``, a sum), so TorchScript, ``torch.export`` and ONNX take it.

    >>> enc = TableEncoder([{"name": "a", "type": "number", "fill": 2.0, "missing_flag": True},
    ...                     {"name": "c", "type": "category", "categories": ["x", "y"]}])
    >>> enc(torch.tensor([[1.0, 1.0], [float("nan"), float("nan")]]))[:, 0].tolist()
    [[1.0, 0.0, 0.0, 1.0, 0.0], [2.0, 1.0, 0.0, 0.0, 1.0]]
    """

    def __init__(self, columns: list[dict[str, Any]], mean: list[float] | None = None,
                 std: list[float] | None = None) -> None:
        super().__init__()
        self.columns = [dict(c) for c in columns]
        width = sum(encoded_width(c) for c in columns)
        self.register_buffer("mean", torch.tensor(mean if mean is not None else [0.0] * width, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std if std is not None else [1.0] * width, dtype=torch.float32))
        for j, c in enumerate(self.columns):  # bin edges as float64: the same comparisons as numpy's digitize
            if c["type"] != "category" and c.get("bins"):
                self.register_buffer(f"inner{j}", torch.tensor(c["bins"][1:-1], dtype=torch.float64))

    @staticmethod
    def _indicators(code: torch.Tensor, k: int, dtype: torch.dtype) -> torch.Tensor:
        return (code[:, None] == torch.arange(k, device=code.device)[None, :]).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], -1)
        parts = []
        for j, c in enumerate(self.columns):
            col = x[:, j]
            missing = torch.isnan(col)
            if c["type"] == "category":
                k = len(c["categories"])
                code = torch.where(missing, torch.full_like(col, float(k)), col).long()
                parts.append(self._indicators(code, k + 1, x.dtype))
            elif c.get("bins"):
                inner = getattr(self, f"inner{j}")
                code = (col.double()[:, None] >= inner[None, :]).sum(dim=1)
                code = torch.where(missing, torch.full_like(code, inner.numel() + 1), code)
                parts.append(self._indicators(code, inner.numel() + 2, x.dtype))
            else:
                parts.append(torch.where(missing, torch.full_like(col, float(c["fill"])), col)[:, None])
                if c.get("missing_flag"):
                    parts.append(missing.to(x.dtype)[:, None])
        mean, std = cast(torch.Tensor, self.mean), cast(torch.Tensor, self.std)
        return ((torch.cat(parts, dim=1) - mean) / std).unsqueeze(1)
