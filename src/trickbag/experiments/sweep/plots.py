"""The sweep's figures: optimisation history and parameter importances."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_history", "plot_importances"]


def plot_history(trials: Sequence[Any], TS: Any, metric: str, direction: str, path: Path) -> Path:
    """Objective of every finished trial, last reported value of pruned ones, and the best so far."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trickbag._files import atomic_save_figure

    fig, ax = plt.subplots(figsize=(7, 4.2))
    done = [(t.number, t.value) for t in trials if t.state == TS.COMPLETE and t.value is not None]
    pruned = [(t.number, t.intermediate_values[max(t.intermediate_values)]) for t in trials
              if t.state == TS.PRUNED and t.intermediate_values]
    if done:
        ax.plot(*zip(*done), "o", color="C0", label="finished trial")
        best, bests = None, []
        for n, v in sorted(done):
            best = v if best is None else (max(best, v) if direction == "maximize" else min(best, v))
            bests.append((n, best))
        ax.step(*zip(*bests), where="post", color="C3", label="best so far")
    if pruned:
        ax.plot(*zip(*pruned), "x", color="C7", label="pruned (last value)")
    ax.set_xlabel("trial")
    ax.set_ylabel(metric)
    ax.set_title(f"optimisation history ({direction})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return atomic_save_figure(fig, path)


def plot_importances(importances: dict[str, float], path: Path) -> Path:
    """Horizontal bars of fANOVA importances (they sum to 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trickbag._files import atomic_save_figure

    names = list(importances)[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(names) + 1.5))
    ax.barh(names, [importances[n] for n in names], color="C0")
    ax.set_xlabel("importance (fANOVA, normalised)")
    ax.set_title("parameter importances")
    ax.grid(alpha=0.3, axis="x")
    return atomic_save_figure(fig, path)
