"""Plot a learning-rate schedule to PNG without touching the caller's optimizer or scheduler."""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.optim import lr_scheduler as lrs

__all__ = ["plot_lr"]


class _ShadowOptimizer(torch.optim.Optimizer):
    """Stand-in optimizer holding copies of another optimizer's param-group settings, one dummy tensor each."""

    def __init__(self, groups: list[dict[str, Any]]) -> None:
        super().__init__(groups, {})

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        return None


def _shadow_copy(scheduler: lrs.LRScheduler) -> lrs.LRScheduler:
    """Deep-copy ``scheduler`` onto a shadow optimizer so stepping it leaves the original untouched."""
    optimizer = scheduler.optimizer
    groups = []
    for group in optimizer.param_groups:
        shadow = {k: copy.deepcopy(v) for k, v in group.items() if k not in ("params", "param_names")}
        shadow["params"] = [torch.zeros(1, requires_grad=True)]
        groups.append(shadow)
    shadow_opt = _ShadowOptimizer(groups)
    # Every reference to the real optimizer inside the scheduler (and its sub-schedulers) is
    # replaced by the shadow; parameters and optimizer state are never copied.
    return copy.deepcopy(scheduler, memo={id(optimizer): shadow_opt})


def plot_lr(
    scheduler_or_factory: lrs.LRScheduler | Callable[[], lrs.LRScheduler],
    steps: int,
    path: str | os.PathLike[str],
) -> tuple[Path, list[list[float]]]:
    """Step a copy of an LR schedule ``steps`` times and write a PNG of LR per update, one line per param group.

    ``scheduler_or_factory`` is either a scheduler, which is copied onto a stand-in optimizer
    (the caller's optimizer, its learning rates and the scheduler's position are not changed;
    the plot starts from the scheduler's current position), or a zero-argument callable that
    builds a fresh scheduler.  ``ReduceLROnPlateau`` depends on metrics and cannot be plotted.
    Drawn with matplotlib's Agg canvas (no display needed; pyplot's global state is not used).

    Returns ``(path, lrs)`` where ``lrs[t][g]`` is the LR of param group ``g`` used by update ``t``
    (``len(lrs) == steps``).

    >>> import tempfile
    >>> from trickbag.optim import build_scheduler
    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    >>> sched = build_scheduler(opt, "linear", total_steps=4)
    >>> out, lrs_per_step = plot_lr(sched, 4, Path(tempfile.mkdtemp()) / "lr.png")
    >>> [round(v[0], 3) for v in lrs_per_step], out.suffix, opt.param_groups[0]["lr"]
    ([0.1, 0.075, 0.05, 0.025], '.png', 0.1)
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"plot_lr: steps must be an integer >= 1, got {steps!r}")
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"plot_lr: path must end in .png (a PNG is written), got {str(path)!r}")
    if isinstance(scheduler_or_factory, lrs.ReduceLROnPlateau):
        raise TypeError("plot_lr: ReduceLROnPlateau follows a metric and has no fixed schedule to plot")
    if isinstance(scheduler_or_factory, lrs.LRScheduler):
        scheduler = _shadow_copy(scheduler_or_factory)
    elif callable(scheduler_or_factory):
        scheduler = scheduler_or_factory()
        if isinstance(scheduler, lrs.ReduceLROnPlateau) or not isinstance(scheduler, lrs.LRScheduler):
            raise TypeError(
                "plot_lr: the factory must return a torch.optim.lr_scheduler.LRScheduler other than "
                f"ReduceLROnPlateau, got {type(scheduler).__name__}"
            )
    else:
        raise TypeError(
            "plot_lr: scheduler_or_factory must be an LR scheduler or a zero-argument callable building one, "
            f"got {type(scheduler_or_factory).__name__}"
        )

    lrs_per_step: list[list[float]] = []
    with warnings.catch_warnings():
        # The copy is stepped without optimizer updates; torch's call-order warnings do not apply.
        warnings.simplefilter("ignore", UserWarning)
        for t in range(steps):
            lrs_per_step.append([float(g["lr"]) for g in scheduler.optimizer.param_groups])
            if t + 1 < steps:
                scheduler.step()

    from trickbag._optional import require

    require("matplotlib", extra="app", feature="trickbag.optim.plot_lr")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 3.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    n_groups = len(lrs_per_step[0])
    for g in range(n_groups):
        ax.plot(range(steps), [row[g] for row in lrs_per_step], label=f"param group {g}")
    ax.set_xlabel("optimizer update")
    ax.set_ylabel("learning rate")
    ax.set_title(type(scheduler).__name__)
    ax.grid(True, alpha=0.3)
    if n_groups > 1:
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path, lrs_per_step
