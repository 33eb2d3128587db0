"""The pruning plug-in: report a per-epoch metric to an Optuna trial, stop the run when the pruner says so."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import StopReason

if TYPE_CHECKING:
    from trickbag.plugin.state import State

__all__ = ["PruningReporter"]


class PruningReporter(Plugin):
    """Report ``metric`` to an Optuna trial after every epoch; stop the run when the pruner says so.

    The value of ``state.metrics[metric]`` at EPOCH_END is reported with ``step = epoch`` (0-based).
    When ``trial.should_prune()`` is true, the run is stopped with :attr:`StopReason.PRUNED` and
    :attr:`pruned` is set; the caller then raises ``optuna.TrialPruned`` (raising inside the loop
    would skip the other plug-ins' epoch-end work, such as writing metrics.csv and checkpoints).
    Works in any :class:`~trickbag.train.trainer.Trainer` driven by your own Optuna objective.

    >>> class FakeTrial:
    ...     def report(self, value, step): self.last = (value, step)
    ...     def should_prune(self): return True
    >>> PruningReporter(FakeTrial(), "val/acc").pruned
    False
    """

    name = "pruning_reporter"

    def __init__(self, trial: Any, metric: str) -> None:
        self.trial = trial
        self.metric = metric
        self.pruned = False
        self.reported: list[tuple[int, float]] = []

    def on_epoch_end(self, state: State) -> None:
        value = state.metrics.get(self.metric)
        if value is None:
            return
        value = float(value)
        self.trial.report(value, step=int(state.epoch))
        self.reported.append((int(state.epoch), value))
        if self.trial.should_prune():
            self.pruned = True
            state.stop(StopReason.PRUNED, f"by the sweep at epoch {state.epoch + 1} ({self.metric}={value:.4g})")
