"""Test-time files of a classification run: the confusion matrix (CSV and PNG) and per-class accuracy."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trickbag._files import atomic_save_figure, atomic_write_text

__all__ = ["write_test_details"]


def _csv(rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def write_test_details(run_dir: Path, details: dict[str, Any], classes: list[str], plots: bool) -> list[Path]:
    """``confusion.csv`` (rows: true class, columns: predicted), ``per_class.csv`` (accuracy and support per
    class) and, with ``plots``, ``confusion.png``; returns the files written."""
    confusion = details.get("confusion")
    if confusion is None:
        return []
    m = confusion.long().tolist()
    names = [str(c) for c in classes] + [str(i) for i in range(len(classes), len(m))]
    out = [Path(run_dir) / "confusion.csv", Path(run_dir) / "per_class.csv"]
    atomic_write_text(
        out[0], _csv([["true \\ predicted", *names[: len(m)]]] + [[names[i], *row] for i, row in enumerate(m)])
    )
    per = details.get("per_class_acc")
    rows = [["class", "accuracy", "support"]]
    for i, row in enumerate(m):
        support = sum(row)
        acc = float(per[i]) if per is not None and support else float("nan")
        rows.append([names[i], f"{acc:.4f}", support])
    atomic_write_text(out[1], _csv(rows))
    if plots and len(m) <= 50:
        out.append(_plot(Path(run_dir) / "confusion.png", m, names[:len(m)]))
    return out


def _plot(path: Path, m: list[list[int]], names: list[str]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = len(m)
    fig, ax = plt.subplots(figsize=(min(12, 2 + 0.45 * k), min(11, 1.6 + 0.42 * k)))
    totals = [max(1, sum(row)) for row in m]
    shares = [[v / t for v in row] for row, t in zip(m, totals)]
    image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, fraction=0.046, label="share of the true class")
    ax.set_xticks(range(k), names, rotation=90 if k > 8 else 0, fontsize=8)
    ax.set_yticks(range(k), names, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    if k <= 20:
        for i in range(k):
            for j in range(k):
                if m[i][j]:
                    ax.text(j, i, str(m[i][j]), ha="center", va="center", fontsize=7,
                            color="white" if shares[i][j] > 0.5 else "black")
    ax.set_title("confusion matrix on the test split (best.pt)")
    return atomic_save_figure(fig, path)
