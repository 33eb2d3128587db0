"""Early stopping: a pure decision rule with its own state and a stop reason."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from trickbag.plugin.interface import Plugin

if TYPE_CHECKING:
    from trickbag.plugin.state import State

__all__ = ["EarlyStopping", "EarlyStop"]


class EarlyStopping:
    """Stop when a monitored metric has not improved for ``patience`` consecutive checks.

    An improvement is a value better than the best so far by more than ``min_delta``
    (``value > best + min_delta`` in ``mode="max"``, ``value < best - min_delta`` in ``mode="min"``).
    A non-finite value never counts as an improvement. Use :meth:`step` once per evaluation; it
    returns ``True`` when training should stop, and :attr:`reason` says why.

    Args:
        patience: checks without improvement tolerated before stopping (>= 1).
        mode: ``"max"`` for accuracy-like metrics, ``"min"`` for losses.
        min_delta: the smallest change that counts as an improvement (>= 0).
        monitor: the metric's name, used in :attr:`reason`.

    >>> es = EarlyStopping(patience=2, mode="min")
    >>> [es.step(v) for v in [1.0, 0.9, 0.95, 0.91]]
    [False, False, False, True]
    >>> es.reason
    'val/loss did not improve for 2 evaluations (best 0.9 at evaluation 2)'
    """

    def __init__(
        self, patience: int = 5, mode: Literal["max", "min"] = "max", min_delta: float = 0.0, monitor: str = "val/loss"
    ) -> None:
        if not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be an int >= 1, got {patience!r}")
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        if not min_delta >= 0:
            raise ValueError(f"min_delta must be >= 0, got {min_delta!r}")
        self.patience, self.mode, self.min_delta, self.monitor = patience, mode, float(min_delta), monitor
        self.best: float | None = None
        self.best_index = 0
        self.checks = 0
        self.bad_checks = 0
        self.reason: str | None = None

    def is_improvement(self, value: float) -> bool:
        """Whether ``value`` beats the best so far by more than ``min_delta`` (pure; no state change)."""
        if not math.isfinite(value):
            return False
        if self.best is None:
            return True
        if self.mode == "max":
            return value > self.best + self.min_delta
        return value < self.best - self.min_delta

    def step(self, value: float) -> bool:
        """Record one check of the metric; return ``True`` if training should stop now."""
        value = float(value)
        self.checks += 1
        if self.is_improvement(value):
            self.best, self.best_index, self.bad_checks = value, self.checks, 0
        else:
            self.bad_checks += 1
        if self.bad_checks >= self.patience:
            best = "none" if self.best is None else f"{self.best:.6g}"
            self.reason = (
                f"{self.monitor} did not improve for {self.bad_checks} evaluations "
                f"(best {best} at evaluation {self.best_index})"
            )
            return True
        return False

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "best_index": self.best_index,
            "checks": self.checks,
            "bad_checks": self.bad_checks,
            "reason": self.reason,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = state["best"]
        self.best_index = int(state["best_index"])
        self.checks = int(state["checks"])
        self.bad_checks = int(state["bad_checks"])
        self.reason = state.get("reason")


class EarlyStop(Plugin):
    """Stop training when ``monitor`` has not improved for ``patience`` evaluations (see :class:`EarlyStopping`)."""

    def __init__(self, monitor: str = "val/acc", mode: Literal["max", "min"] = "max", patience: int = 5,
                 min_delta: float = 0.0) -> None:
        self.rule = EarlyStopping(patience=patience, mode=mode, min_delta=min_delta, monitor=monitor)

    def on_epoch_end(self, state: State) -> None:
        value = state.metrics.get(self.rule.monitor)
        if value is None:
            return
        if self.rule.step(value):
            from trickbag.plugin.state import StopReason

            state.stop(StopReason.EARLY_STOPPING, str(self.rule.reason))

    def state_dict(self) -> dict[str, Any]:
        return self.rule.state_dict()

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.rule.load_state_dict(sd)
