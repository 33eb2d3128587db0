"""Plots of a run: ``curves.png`` (loss and metrics per epoch) and ``lr.png`` (learning rate per update)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from trickbag._files import atomic_save_figure
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State

__all__ = ["Plots", "write_plots"]


class Plots(Plugin):
    """``curves.png`` (loss on a log scale and the monitored metric per epoch, the best epoch marked, the
    run's name as title) and ``lr.png`` (learning rate per update), written at the end of ``fit``."""

    def __init__(self, directory: str | Path, *, title: str = "", monitor: str = "val/acc", mode: str = "max") -> None:
        self.directory = Path(directory)
        self.title, self.monitor, self.mode = title, monitor, mode
        self.lrs: list[list[float]] = []

    def on_step(self, state: State) -> None:
        if not state.step_skipped:  # one point per optimizer update
            self.lrs.append(state.lrs())

    def on_fit_end(self, state: State) -> None:
        write_plots(self.directory, state.history, self.lrs, title=self.title, monitor=self.monitor, mode=self.mode)

    def state_dict(self) -> dict[str, Any]:
        return {"lrs": [list(x) for x in self.lrs]}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.lrs = [list(x) for x in sd["lrs"]]


def _best_epoch(history: list[dict[str, float]], monitor: str, mode: str) -> tuple[float, float] | None:
    pts = [(h["epoch"] + 1, h[monitor]) for h in history if monitor in h and math.isfinite(h[monitor])]
    if not pts:
        return None
    best = (max if mode == "max" else min)(v for _, v in pts)
    return [p for p in pts if p[1] == best][-1]  # a later epoch wins a tie, as for best.pt


def _metric_panel(ax: Any, history: list[dict[str, float]], epochs: list[float], monitor: str) -> None:
    name = monitor.partition("/")[2].removesuffix("_raw")
    if name == "loss" or not any(f"val/{name}" in h or f"train/{name}" in h for h in history):
        name = next((k[4:] for h in history for k in h if k.startswith("val/") and k not in ("val/loss", "val/n")),
                    name)
    for split in ("train", "val"):
        pts = [(e, h[f"{split}/{name}"]) for e, h in zip(epochs, history) if f"{split}/{name}" in h]
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=3, label=split)
    ax.set_title(name)
    ax.set_ylabel(name)


def write_plots(directory: Path, history: list[dict[str, float]], lrs: list[list[float]], *, title: str = "",
                monitor: str = "val/acc", mode: str = "max") -> list[Path]:
    """Draw curves.png and lr.png from a run's history; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    if history:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        epochs = [h["epoch"] + 1 for h in history]
        for split in ("train", "val"):
            pts = [(e, h[f"{split}/loss"]) for e, h in zip(epochs, history) if f"{split}/loss" in h]
            if pts:
                ax1.plot(*zip(*pts), marker="o", ms=3, label=split)
        if all(h.get(k, 1.0) > 0 for h in history for k in ("train/loss", "val/loss")):
            ax1.set_yscale("log")
        ax1.set_title("loss")
        _metric_panel(ax2, history, epochs, monitor)
        best = _best_epoch(history, monitor, mode)
        for ax in (ax1, ax2):
            if best is not None:
                ax.axvline(best[0], color="C3", ls="--", lw=1, label=f"best {monitor} (epoch {best[0]:g})")
            ax.set_xlabel("epoch")
            ax.grid(alpha=0.3, which="both")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        head = f"{title}: " if title else ""
        fig.suptitle(head + (f"best {monitor} {best[1]:.4g} at epoch {best[0]:g}" if best else "training curves"))
        out.append(atomic_save_figure(fig, directory / "curves.png"))
    if lrs:
        fig, ax = plt.subplots(figsize=(6, 4))
        for g in range(len(lrs[0])):
            ax.plot(range(1, len(lrs) + 1), [x[g] if g < len(x) else float("nan") for x in lrs], label=f"group {g}")
        ax.set_xlabel("optimizer update")
        ax.set_ylabel("learning rate")
        ax.set_title(f"{title}: learning rate" if title else "learning rate")
        ax.grid(alpha=0.3)
        if len(lrs[0]) > 1:
            ax.legend()
        out.append(atomic_save_figure(fig, directory / "lr.png"))
    return out
