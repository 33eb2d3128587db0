"""Plots of a run: ``curves.png`` (loss and metrics per epoch) and ``lr.png`` (learning rate per update)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trickbag._files import atomic_save_figure
from trickbag.train.plugin import Plugin
from trickbag.train.state import State

__all__ = ["Plots", "write_plots"]


class Plots(Plugin):
    """``curves.png`` (loss and accuracy per epoch) and ``lr.png`` (learning rate per update)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.lrs: list[list[float]] = []

    def on_step(self, state: State) -> None:
        if not state.step_skipped:  # one point per optimizer update
            self.lrs.append(state.lrs())

    def on_fit_end(self, state: State) -> None:
        write_plots(self.directory, state.history, self.lrs)

    def state_dict(self) -> dict[str, Any]:
        return {"lrs": [list(x) for x in self.lrs]}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.lrs = [list(x) for x in sd["lrs"]]


def write_plots(directory: Path, history: list[dict[str, float]], lrs: list[list[float]]) -> list[Path]:
    """Draw curves.png and lr.png from a run's history; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    if history:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        epochs = [h["epoch"] + 1 for h in history]
        for key, ax in (("loss", ax1), ("acc", ax2)):
            for split in ("train", "val"):
                pts = [(e, h[f"{split}/{key}"]) for e, h in zip(epochs, history) if f"{split}/{key}" in h]
                if pts:
                    ax.plot(*zip(*pts), marker="o", ms=3, label=split)
            ax.set_xlabel("epoch")
            ax.set_ylabel(key)
            ax.grid(alpha=0.3)
            ax.legend()
        ax1.set_title("loss")
        ax2.set_title("accuracy")
        out.append(atomic_save_figure(fig, directory / "curves.png"))
    if lrs:
        fig, ax = plt.subplots(figsize=(6, 4))
        for g in range(len(lrs[0])):
            ax.plot(range(1, len(lrs) + 1), [x[g] if g < len(x) else float("nan") for x in lrs], label=f"group {g}")
        ax.set_xlabel("optimizer update")
        ax.set_ylabel("learning rate")
        ax.grid(alpha=0.3)
        if len(lrs[0]) > 1:
            ax.legend()
        out.append(atomic_save_figure(fig, directory / "lr.png"))
    return out
