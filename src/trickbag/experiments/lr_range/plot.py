"""The LR range test's outputs: ``lr_find.png`` (loss against LR) and ``lr_find.csv``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from trickbag.experiments.lr_range.range_test import LRFindResult

__all__ = ["plot_lr_find", "write_lr_find"]


def plot_lr_find(result: LRFindResult, path: str | Path) -> Path:
    """Loss (raw and smoothed) against LR on a log axis, with the suggestion and the minimum marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trickbag._files import atomic_save_figure

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(result.lrs, result.losses, color="C0", alpha=0.3, lw=1, label="loss")
    sm = [s if math.isfinite(s) else np.nan for s in result.smoothed]
    ax.plot(result.lrs, sm, color="C0", lw=2, label="smoothed loss")
    ax.axvline(result.suggestion, color="C3", ls="--", label=f"suggested {result.suggestion:.2g} ({result.rule})")
    ax.axvline(result.min_lr, color="C7", ls=":", label=f"minimum at {result.min_lr:.2g}")
    ax.set_xscale("log")
    finite = [v for v in sm if not math.isnan(v)]
    if finite:  # keep the diverging tail from squashing the interesting part
        lo, hi = min(finite), max(finite[0], min(finite) * 4)
        ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.1 * (hi - lo))
    ax.set_xlabel("learning rate")
    ax.set_ylabel("training loss")
    ax.set_title("LR range test")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return atomic_save_figure(fig, path)


def write_lr_find(result: LRFindResult, out_dir: Path) -> list[Path]:
    """Write ``lr_find.png`` and ``lr_find.csv`` (step, lr, loss, smoothed) into ``out_dir``."""
    from trickbag._files import atomic_write_text
    from trickbag.experiments.report import csv_text

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [[i, lr, loss, s] for i, (lr, loss, s) in enumerate(zip(result.lrs, result.losses, result.smoothed))]
    csv_path = out_dir / "lr_find.csv"
    atomic_write_text(csv_path, csv_text(["step", "lr", "loss", "smoothed"], rows))
    return [plot_lr_find(result, out_dir / "lr_find.png"), csv_path]
