"""Loggers of a run: ``metrics.csv``, TensorBoard event files, Weights & Biases.

* :class:`CSVLogger` — one row per ``every_steps`` updates (step loss, LR) and one per epoch;
* :class:`TensorBoardLogger` — the same values as TensorBoard scalars;
* :class:`WandbLogger` (``log.wandb=true``) — the resolved recipe is the W&B run config; step rows
  and every epoch metric, at ``step`` = optimizer updates. Offline mode unless ``WANDB_MODE`` says
  otherwise (no account needed; ``wandb sync`` uploads later); files go under the run directory
  unless ``WANDB_DIR`` is set. The W&B run id is kept in checkpoints, so a resumed run continues
  the same W&B run.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trickbag._files import atomic_write_text
from trickbag._optional import require
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

__all__ = ["CSVLogger", "TensorBoardLogger", "WandbLogger"]


class CSVLogger(Plugin):
    """Write ``metrics.csv``: one row per ``every_steps`` updates (step loss, LR) and one per epoch.

    The file is rewritten atomically at each epoch end (a crash never leaves a torn row), and its
    rows travel in checkpoints, so a resumed run continues the same file without duplicates.
    """

    def __init__(self, path: str | Path, every_steps: int = 10) -> None:
        self.path = Path(path)
        self.every_steps = every_steps
        self.rows: list[dict[str, float]] = []

    def on_step(self, state: State) -> None:
        if state.step_skipped:  # no update was made: the step number is the previous update's
            return
        if state.step % self.every_steps == 0 and state.loss is not None:
            row = {
                "epoch": float(state.epoch),
                "step": float(state.step),
                "train/step_loss": float(state.loss.detach()),
            }
            for i, lr in enumerate(state.lrs()):
                row[f"lr/group{i}"] = lr
            if state.grad_norm is not None:
                row["train/grad_norm"] = float(state.grad_norm)
            self.rows.append(row)

    def on_epoch_end(self, state: State) -> None:
        self.rows.append(dict(state.metrics))
        self.flush()

    def flush(self) -> None:
        keys: list[str] = ["epoch", "step"]
        for r in self.rows:
            keys += [k for k in r if k not in keys]
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=keys, restval="", lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow({k: (int(v) if k in ("epoch", "step") else f"{v:.6g}") for k, v in r.items()})
        atomic_write_text(self.path, buf.getvalue())

    def state_dict(self) -> dict[str, Any]:
        return {"rows": [dict(r) for r in self.rows]}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.rows = [dict(r) for r in sd["rows"]]


class TensorBoardLogger(Plugin):
    """TensorBoard event files: step loss / LR every ``every_steps`` updates and every epoch metric."""

    def __init__(self, log_dir: str | Path, every_steps: int = 10) -> None:
        self.log_dir = Path(log_dir)
        self.every_steps = every_steps
        self.writer: SummaryWriter | None = None

    def on_fit_start(self, state: State) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step drops events a crashed run wrote after the checkpoint being resumed
        self.writer = SummaryWriter(str(self.log_dir), purge_step=state.step if state.step else None)

    def on_step(self, state: State) -> None:
        if state.step_skipped:  # no update was made: the step number is the previous update's
            return
        if self.writer is not None and state.step % self.every_steps == 0 and state.loss is not None:
            self.writer.add_scalar("train/step_loss", float(state.loss.detach()), state.step)
            for i, lr in enumerate(state.lrs()):
                self.writer.add_scalar(f"lr/group{i}", lr, state.step)

    def on_epoch_end(self, state: State) -> None:
        if self.writer is None:
            return
        for k, v in state.metrics.items():
            if k not in ("epoch", "step") and not k.startswith("lr/"):
                self.writer.add_scalar(k, v, state.step)
        self.writer.flush()

    def on_fit_end(self, state: State) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class WandbLogger(Plugin):
    """Log a run to Weights & Biases (offline by default): recipe as config, step rows and epoch metrics.

    Args:
        run_dir: the run directory (W&B files go in it unless ``WANDB_DIR`` is set; its name is the
            W&B run name).
        config: the resolved recipe as a plain dict.
        every_steps: step-level logging interval, in optimizer updates.
        project: W&B project; default ``WANDB_PROJECT`` or ``"trickbag"``.
    """

    name = "wandb"

    def __init__(self, run_dir: str | Path, config: dict[str, Any], *, every_steps: int = 10,
                 project: str | None = None) -> None:
        require("wandb", extra="wandb", feature="log.wandb=true")  # fail before training, with the extra to install
        self.run_dir = Path(run_dir)
        self.config = config
        self.every_steps = every_steps
        self.project = project or os.environ.get("WANDB_PROJECT") or "trickbag"
        self.run: Any = None
        self.run_id: str | None = None

    def on_fit_start(self, state: State) -> None:
        wandb = require("wandb", extra="wandb", feature="log.wandb=true")
        kwargs: dict[str, Any] = {}
        if not os.environ.get("WANDB_DIR"):
            self.run_dir.mkdir(parents=True, exist_ok=True)
            kwargs["dir"] = str(self.run_dir)
        self.run = wandb.init(
            project=self.project,
            name=self.run_dir.name,
            config=self.config,
            id=self.run_id,
            resume="allow" if self.run_id else None,
            mode=os.environ.get("WANDB_MODE", "offline"),
            settings=wandb.Settings(silent=True, console="off"),
            **kwargs,
        )
        self.run_id = self.run.id

    def on_step(self, state: State) -> None:
        if self.run is None or state.step % self.every_steps or state.loss is None:
            return
        row = {"train/step_loss": float(state.loss.detach())}
        row.update({f"lr/group{i}": lr for i, lr in enumerate(state.lrs())})
        if state.grad_norm is not None:
            row["train/grad_norm"] = float(state.grad_norm)
        self.run.log(row, step=state.step)

    def on_epoch_end(self, state: State) -> None:
        if self.run is not None:
            self.run.log({k: v for k, v in state.metrics.items() if k != "step"}, step=state.step)

    def on_fit_end(self, state: State) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None

    def state_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.run_id = sd.get("run_id")
