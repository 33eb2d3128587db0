"""The state object plug-ins read and write; the trainer's only surface towards them."""

from __future__ import annotations

import dataclasses
import enum
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trickbag.runtime import DistInfo

__all__ = ["Services", "State", "StopReason"]


class StopReason(str, enum.Enum):
    """Why a run ended before ``max_epochs``."""

    EARLY_STOPPING = "early stopping"
    NONFINITE = "non-finite"
    INTERRUPTED = "interrupted"
    PRUNED = "pruned"
    REQUESTED = "stopped by a plug-in"


@dataclasses.dataclass(frozen=True)
class Services:
    """What the trainer does for a plug-in when asked (``state.services``), the only calls back into it."""

    #: ``save_checkpoint(path, *, resume=True, **extra) -> path``: write the trainer's state atomically at the
    #: current point (``resume=False``: weights only, a ``best.pt``); see :meth:`Trainer.save_checkpoint`
    save_checkpoint: Callable[..., Path]
    #: ``weights_finite() -> bool``: whether every weight and buffer is finite (over every process's shards
    #: under FSDP: call it where every rank calls it, or from a plug-in at CHECKPOINT on rank 0)
    weights_finite: Callable[[], bool]
    #: ``eval_loop(loader) -> metrics``: the evaluation loop alone (no events, no mode change),
    #: for plug-ins that evaluate a second set of weights (EMA / SWA report the raw weights too)
    eval_loop: Callable[[Any], dict[str, Any]]


def _moved(name: str) -> None:
    warnings.warn(f"state.{name} moved to state.services.{name}; the old name goes in the next release",
                  DeprecationWarning, stacklevel=3)


@dataclasses.dataclass(kw_only=True)
class State:
    """Everything a plug-in may look at or change during :meth:`Trainer.fit`.

    Counters: ``epoch`` is the index of the current epoch (0-based; after ``fit`` the number of
    finished epochs), ``step`` the number of optimizer updates done, ``batch_idx`` the index of the
    current micro-batch within the epoch.
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    task: Any  # trickbag.train.tasks.Task: the loss and the metrics of the prediction problem
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # the training loss (the task's, or a trick's)
    train_loader: Any
    val_loader: Any
    device: torch.device
    precision: str
    accumulate: int
    max_epochs: int
    scheduler: Any = None
    scaler: Any = None
    run_dir: Path | None = None
    dist: DistInfo = dataclasses.field(default_factory=DistInfo)
    #: the metric best.pt, early stopping and a plateau schedule follow, and whether larger is better
    monitor: str = "val/acc"
    mode: str = "max"

    epoch: int = 0
    step: int = 0
    batch_idx: int = 0
    batches_per_epoch: int = 0
    batch: Any = None  # (x, y) on the device; BATCH_START may replace it
    output: torch.Tensor | None = None
    loss: torch.Tensor | None = None  # LOSS may replace it (un-divided by accumulation)
    grad_norm: torch.Tensor | None = None  # total norm before clipping, when clipping is on
    step_skipped: bool = False  # the last update was skipped (fp16 overflow, non-finite, a plug-in's veto)
    veto_reason: str = ""  # why the last update was vetoed (:meth:`veto_update`), "" otherwise
    skipped_steps: int = 0  # updates skipped so far, for any reason
    nonfinite_skipped: int = 0  # of which for a non-finite loss or gradients
    closure_pass: bool = False  # True while a two-pass optimizer re-runs forward/backward
    epoch_done: bool = False  # at CHECKPOINT: True after EPOCH_END, False after STEP or a mid-epoch stop

    metrics: dict[str, float] = dataclasses.field(default_factory=dict)  # latest epoch's metrics
    epoch_metrics: dict[str, Any] = dataclasses.field(default_factory=dict)  # plug-ins' per-epoch values
    eval_metrics: dict[str, float] = dataclasses.field(default_factory=dict)  # latest evaluate()
    history: list[dict[str, float]] = dataclasses.field(default_factory=list)  # one dict per epoch
    should_stop: bool = False
    stop_reason: StopReason | None = None
    stop_detail: str = ""
    predict: Callable[[torch.Tensor], torch.Tensor] | None = None  # forward used by evaluate()
    #: the weights evaluation uses when they are not the model's own (EMA, SWA): saved as ``eval_model``;
    #: set with :meth:`provide_eval_weights`
    eval_weights: Callable[[], dict[str, torch.Tensor]] | None = None
    eval_weights_owner: str = ""
    #: what the trainer does on a plug-in's request (write a checkpoint, check the weights, run the evaluation
    #: loop); None on a State built without a Trainer
    services: Services | None = None

    @property
    def save_checkpoint(self) -> Callable[..., Path] | None:
        """Deprecated: ``state.services.save_checkpoint``."""
        _moved("save_checkpoint")
        return self.services.save_checkpoint if self.services is not None else None

    @property
    def weights_finite(self) -> Callable[[], bool] | None:
        """Deprecated: ``state.services.weights_finite``."""
        _moved("weights_finite")
        return self.services.weights_finite if self.services is not None else None

    @property
    def eval_loop(self) -> Callable[[Any], dict[str, Any]] | None:
        """Deprecated: ``state.services.eval_loop``."""
        _moved("eval_loop")
        return self.services.eval_loop if self.services is not None else None

    def veto_update(self, reason: str = "") -> None:
        """At AFTER_BACKWARD: skip the update about to be applied (no optimizer step, no schedule step; the
        gradients are dropped and the update counted as skipped). Plug-ins at STEP see ``step_skipped``."""
        self.step_skipped = True
        self.veto_reason = reason

    def provide_eval_weights(self, provider: Callable[[], dict[str, torch.Tensor]], *, owner: str) -> None:
        """Name the weights evaluation reports and checkpoints store as ``eval_model`` (an average of the
        model's): one provider per run, so a second owner is refused rather than silently replacing it."""
        if self.eval_weights is not None and self.eval_weights_owner != owner:
            raise ValueError(f"{owner} and {self.eval_weights_owner} both provide the weights evaluation uses; "
                             "keep one of them")
        self.eval_weights, self.eval_weights_owner = provider, owner

    def stop(self, reason: StopReason, detail: str = "") -> None:
        """Ask the trainer to stop after the current update (or epoch), with a reason to report."""
        self.should_stop = True
        if self.stop_reason is None:
            self.stop_reason, self.stop_detail = StopReason(reason), detail

    @property
    def stop_message(self) -> str | None:
        """``"<reason>: <detail>"`` of the stop, or None while the run goes on."""
        if self.stop_reason is None:
            return None
        return f"{self.stop_reason.value}: {self.stop_detail}" if self.stop_detail else self.stop_reason.value

    def lrs(self) -> list[float]:
        """Current learning rate of every param group."""
        return [float(g["lr"]) for g in self.optimizer.param_groups]
