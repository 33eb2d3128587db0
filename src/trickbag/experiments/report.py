"""Compare finished runs: one table of recipe differences and results, one overlaid curves plot, one HTML page.

``trickbag report RUN_DIR [RUN_DIR ...] --out DIR`` reads each run directory (``recipe.yaml``,
``metrics.csv``, ``summary.txt``) and writes ``DIR/table.md``, ``DIR/table.csv``, ``DIR/curves.png``
and ``DIR/report.html`` (the PNG embedded as base64, so the page is a single file). A folder that is
not a run directory (no ``recipe.yaml``: an ablation or sweep folder, an lr-find output) is skipped
with a note, so ``trickbag report runs/*`` works on a folder of runs and experiments.

The table lists only the recipe keys whose values differ between the runs (``run.name`` and
``run.dir`` excluded), then: epochs, best ``val/acc`` (max over epochs), best ``val/loss`` (min),
final ``train/loss``, test accuracy of ``best.pt`` and wall time (from ``summary.txt``; for a run
without one, the sum of its epoch times).

This module also holds the small table helpers the other experiments use (Markdown and CSV
tables); none of it imports torch.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import html
import io
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from trickbag._files import atomic_save_figure, atomic_write_text
from trickbag.config.loading import run_recipe_path
from trickbag.experiments import ExperimentError

__all__ = ["RunInfo", "RunComparison", "read_run", "compare_runs", "write_report", "markdown_table"]


# --------------------------------------------------------------------------- file helpers
def fmt(value: Any, digits: int = 4) -> str:
    """A table cell: floats with ``digits`` decimals, None/NaN as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table with padded columns (cells formatted with :func:`fmt`).

    >>> print(markdown_table(["a", "b"], [[1, 0.5], ["x", None]]))
    | a | b      |
    |---|--------|
    | 1 | 0.5000 |
    | x | —      |
    """
    cells = [[str(h) for h in headers]] + [[fmt(c) if not isinstance(c, str) else c for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def csv_text(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """CSV of the raw values (floats at full precision, None as an empty cell)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(headers)
    for r in rows:
        w.writerow(["" if c is None else (repr(c) if isinstance(c, float) else c) for c in r])
    return buf.getvalue()


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists and other values kept as leaves).

    >>> flatten({"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "name": "x"})
    {'optim.lr': 0.1, 'optim.betas': [0.9, 0.99], 'name': 'x'}
    """
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# --------------------------------------------------------------------------- runs
@dataclasses.dataclass
class RunInfo:
    """What a report needs from one run directory."""

    path: Path
    label: str
    recipe: dict[str, Any]  #: flattened resolved recipe
    history: list[dict[str, float]]  #: epoch rows of metrics.csv
    test_acc: float | None = None
    test_loss: float | None = None
    wall_time_s: float | None = None

    def best(self, key: str, mode: str) -> float | None:
        vals = [h[key] for h in self.history if key in h and not math.isnan(h[key])]
        if not vals:
            return None
        return max(vals) if mode == "max" else min(vals)

    def final(self, key: str) -> float | None:
        vals = [h[key] for h in self.history if key in h]
        return vals[-1] if vals else None


_TEST_RE = re.compile(r"^test acc\s+([0-9.eE+-]+|nan)\b.*?loss\s+([0-9.eE+-]+|nan)", re.M)
_WALL_RE = re.compile(r"^wall time\s+([0-9.eE+-]+) s", re.M)


def read_metrics_csv(path: Path) -> list[dict[str, float]]:
    """Epoch rows of a run's ``metrics.csv`` (rows with ``train/loss``; step rows are skipped)."""
    if not path.is_file():
        return []
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            vals = {}
            for k, v in row.items():
                if k is None or v in (None, ""):
                    continue
                try:
                    vals[k] = float(v)
                except ValueError:
                    continue
            if "train/loss" in vals:
                rows.append(vals)
    return rows


def read_run(path: str | os.PathLike, label: str | None = None) -> RunInfo:
    """Read one run directory (``recipe.yaml`` required; ``metrics.csv`` and ``summary.txt`` if present)."""
    path = Path(path)
    recipe_path = run_recipe_path(path, f"run directory {str(path)!r} does not exist", ExperimentError)
    try:
        recipe = yaml.safe_load(recipe_path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError:
        raise ExperimentError(f"{str(recipe_path)!r} is not valid YAML") from None
    if not isinstance(recipe, dict):
        raise ExperimentError(f"{str(recipe_path)!r} is not a recipe mapping")
    from trickbag.recipe import stored_recipe  # a run before each schedule had its own keys holds them all

    info = RunInfo(path, label or path.name, flatten(stored_recipe(recipe)), read_metrics_csv(path / "metrics.csv"))
    summary = path / "summary.txt"
    if summary.is_file():
        text = summary.read_text(encoding="utf-8", errors="replace")
        if m := _TEST_RE.search(text):
            info.test_acc, info.test_loss = float(m.group(1)), float(m.group(2))
        if m := _WALL_RE.search(text):
            info.wall_time_s = float(m.group(1))
    if info.wall_time_s is None:
        times = [h["train/epoch_time_s"] for h in info.history if "train/epoch_time_s" in h]
        info.wall_time_s = math.fsum(times) if times else None
    return info


@dataclasses.dataclass
class RunComparison:
    """The comparison table of several runs."""

    runs: list[RunInfo]
    diff_keys: list[str]  #: recipe keys whose values differ between the runs
    headers: list[str]
    rows: list[list[Any]]
    skipped: list[str] = dataclasses.field(default_factory=list)  #: notes on the paths that are not runs

    def markdown(self) -> str:
        return markdown_table(self.headers, self.rows)


_IGNORED_KEYS = {"run.name", "run.dir"}
_MISSING = object()


def _cell_value(v: Any) -> str:
    if v is _MISSING:
        return "—"
    if isinstance(v, (list, dict)):
        return yaml.safe_dump(v, default_flow_style=True).strip()
    return str(v)


def _run_paths(run_dirs: Sequence[str | os.PathLike]) -> tuple[list[Path], list[str]]:
    """The run directories among ``run_dirs`` and a note for each other existing path (skipped)."""
    from trickbag.runs.naming import is_run_dir

    if not run_dirs:
        raise ExperimentError("give at least one run directory to report on")
    paths, notes = [], []
    for p in map(Path, run_dirs):
        if not p.exists():
            raise ExperimentError(f"run directory {str(p)!r} does not exist")
        if is_run_dir(p):
            paths.append(p)
        else:
            notes.append(f"skipping {str(p)!r}: not a run directory (a run directory holds recipe.yaml)")
    if not paths and len(run_dirs) == 1:
        raise ExperimentError(f"{str(run_dirs[0])!r} is not a trickbag run directory (no recipe.yaml)")
    if not paths:
        raise ExperimentError(f"none of the {len(run_dirs)} given paths is a trickbag run directory "
                              "(a run directory holds recipe.yaml)")
    return paths, notes


def compare_runs(run_dirs: Sequence[str | os.PathLike]) -> RunComparison:
    """Table of the recipe keys that differ between ``run_dirs`` and each run's results.

    Paths that are not run directories are skipped (see :attr:`RunComparison.skipped`).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name, lr in (("a", 0.1), ("b", 0.01)):
    ...     (d / name).mkdir()
    ...     _ = (d / name / "recipe.yaml").write_text(f"optim: {{lr: {lr}, momentum: 0.9}}")
    >>> (d / "sweep-x").mkdir()
    >>> c = compare_runs([d / "a", d / "b", d / "sweep-x"])
    >>> c.diff_keys, [r.label for r in c.runs], len(c.skipped)
    (['optim.lr'], ['a', 'b'], 1)
    """
    paths, skipped = _run_paths(run_dirs)
    names = [p.name for p in paths]
    labels = names if len(set(names)) == len(names) else [str(p) for p in paths]
    runs = [read_run(p, label) for p, label in zip(paths, labels)]
    keys: list[str] = []
    for r in runs:
        keys += [k for k in r.recipe if k not in keys]
    diff = [
        k
        for k in keys
        if k not in _IGNORED_KEYS and len({_cell_value(r.recipe.get(k, _MISSING)) for r in runs}) > 1
    ]
    columns: list[tuple[str, Any]] = [
        ("epochs", lambda r: len(r.history) if r.history else None),
        ("best val/acc", lambda r: r.best("val/acc", "max")),
        ("best val/r2", lambda r: r.best("val/r2", "max")),  # regression
        ("best val/map", lambda r: r.best("val/map", "max")),  # multi-label
        ("best val/loss", lambda r: r.best("val/loss", "min")),
        ("final train/loss", lambda r: r.final("train/loss")),
        ("test acc", lambda r: r.test_acc),
        ("time (s)", lambda r: r.wall_time_s),
    ]
    values = [[fn(r) for _, fn in columns] for r in runs]
    keep = [i for i in range(len(columns)) if any(v[i] is not None for v in values)]
    headers = ["run"] + diff + [columns[i][0] for i in keep]
    rows = []
    for r, v in zip(runs, values):
        row: list[Any] = [r.label] + [_cell_value(r.recipe.get(k, _MISSING)) for k in diff]
        for i in keep:
            x = v[i]
            row.append(f"{x:.1f}" if columns[i][0] == "time (s)" and x is not None else x)
        rows.append(row)
    return RunComparison(runs, diff, headers, rows, skipped)


def _metric_key(runs: Sequence[RunInfo]) -> str:
    """The validation metric most runs report (accuracy for classification, R² for regression, ...)."""
    counts: dict[str, int] = {}
    for r in runs:
        for k in {k for h in r.history for k in h if k.startswith("val/") and k not in ("val/loss", "val/n")
                  and not k.endswith("_raw")}:
            counts[k] = counts.get(k, 0) + 1
    preferred = ("val/acc", "val/r2", "val/map", "val/f1")
    return max(counts, key=lambda k: (counts[k], k in preferred, -preferred.index(k) if k in preferred else -9),
               default="val/loss")


def plot_curves(runs: Sequence[RunInfo], path: Path) -> Path:
    """Loss (train solid, val dashed, log scale) and the validation metric per epoch, one colour per run.

    Legible with many runs: colours from a 20-colour map, the legend in its own panel beside the
    axes (never on top of the curves), one entry per run.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = _metric_key(runs)
    cmap = plt.get_cmap("tab20" if len(runs) > 10 else "tab10")
    height = max(4.2, 0.22 * len(runs) + 1.0)
    fig, (ax1, ax2, key) = plt.subplots(1, 3, figsize=(14, height), gridspec_kw={"width_ratios": [5, 5, 2.4]})
    handles = []
    for i, r in enumerate(runs):
        color = cmap(i % cmap.N)
        epochs = [h.get("epoch", j) + 1 for j, h in enumerate(r.history)]
        for k, ax, style in (("train/loss", ax1, "-"), ("val/loss", ax1, "--"), (metric, ax2, "-")):
            pts = [(e, h[k]) for e, h in zip(epochs, r.history) if k in h]
            if pts:
                (line,) = ax.plot(*zip(*pts), style, color=color, marker="o", ms=2.5, lw=1.2)
        handles.append(plt.Line2D([], [], color=color, lw=2, label=r.label))
    if all(v > 0 for line in ax1.lines for v in line.get_ydata()):
        ax1.set_yscale("log")
    ax1.set_title("loss (train solid, val dashed)")
    ax2.set_title(metric)
    for ax in (ax1, ax2):
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3, which="both")
    key.axis("off")
    key.legend(handles=handles, loc="upper left", fontsize=8, frameon=False, ncol=1 if len(runs) <= 30 else 2)
    return atomic_save_figure(fig, path)


def _html_page(title: str, comparison: RunComparison, png: bytes) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in comparison.headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(fmt(c) if not isinstance(c, str) else c)}</td>" for c in row) + "</tr>"
        for row in comparison.rows
    )
    paths = "".join(f"<li><code>{html.escape(str(r.path))}</code></li>" for r in comparison.runs)
    img = base64.b64encode(png).decode("ascii")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #bbb;padding:4px 8px;text-align:right}th{background:#eee}"
        "td:first-child{text-align:left}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><table><tr>{head}</tr>{body}</table>"
        f"<h2>Curves</h2><img alt='curves' src='data:image/png;base64,{img}'>"
        f"<h2>Runs</h2><ul>{paths}</ul></body></html>\n"
    )


def write_report(run_dirs: Sequence[str | os.PathLike], out: str | os.PathLike = "report") -> RunComparison:
    """Write ``table.md``, ``table.csv``, ``curves.png`` and a self-contained ``report.html`` into ``out``."""
    comparison = compare_runs(run_dirs)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ExperimentError(f"--out {str(out)!r} is a file; give a folder for the report")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "table.md", comparison.markdown() + "\n")
    atomic_write_text(out / "table.csv", csv_text(comparison.headers, comparison.rows))
    png = plot_curves(comparison.runs, out / "curves.png")
    title = "trickbag report: " + ", ".join(r.label for r in comparison.runs)
    atomic_write_text(out / "report.html", _html_page(title, comparison, png.read_bytes()))
    return comparison
