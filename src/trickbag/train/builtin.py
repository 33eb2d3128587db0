"""Built-in plug-ins: checkpointing, early stopping, metrics.csv, TensorBoard, progress bar, plots."""

from __future__ import annotations

import csv
import io
import math
import re
import sys
import time
from pathlib import Path
from typing import Any, Literal, Optional

from trickbag.train.checkpoint import atomic_save_figure, atomic_write_text
from trickbag.train.early_stopping import EarlyStopping
from trickbag.train.plugin import Plugin
from trickbag.train.state import State

__all__ = ["Checkpointing", "EpochEndCheckpoint", "EarlyStop", "CSVLogger", "TensorBoardLogger", "ProgressBar", "Plots", "list_checkpoints"]

_STEP_CKPT = re.compile(r"^step-(\d+)\.pt$")


def _better(value: float, best: Optional[float], mode: str) -> bool:
    """Whether ``value`` should replace ``best`` for best.pt: better, or equal (a later epoch wins a tie).

    Accuracy on a small validation split is coarse (one image of 144 is 0.7 %), so ties are common;
    of two checkpoints with the same score, the later one has trained longer at a lower learning
    rate and is the better pick.
    """
    if not math.isfinite(value):
        return False
    return best is None or (value >= best if mode == "max" else value <= best)


def list_checkpoints(ckpt_dir: Path) -> list[Path]:
    """Checkpoints in ``ckpt_dir`` to resume from, newest first: ``step-N.pt`` by N, then ``last.pt``."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    steps = []
    for p in ckpt_dir.iterdir():
        m = _STEP_CKPT.match(p.name)
        if m:
            steps.append((int(m.group(1)), p))
    out = [p for _, p in sorted(steps, reverse=True)]
    last = ckpt_dir / "last.pt"
    if last.exists():
        # last.pt is written at epoch ends; order it by modification time among the step files
        out.append(last)
        out.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
    return out


class Checkpointing(Plugin):
    """Write ``last.pt`` after every epoch, ``best.pt`` when the monitored metric improves, and
    optionally ``step-N.pt`` every ``every_steps`` optimizer updates (keeping the newest ``keep``).

    ``extra`` entries (e.g. the recipe) go into every checkpoint. If a plug-in puts a callable under
    ``state.extra["eval_model_state"]`` (EMA, SWA), its result is saved as ``eval_model``: the
    weights that were evaluated and that ``trickbag eval`` / ``predict`` use.

    A checkpoint must be taken after every other plug-in has updated its state for that point:
    add this plug-in last (``step-N.pt`` at STEP then follows the EMA update and the loggers), and
    add :attr:`at_epoch_end` *first* (``trainer.add_plugin(ckpt.at_epoch_end, first=True)``):
    EPOCH_END runs plug-ins in reverse order, so ``last.pt`` / ``best.pt`` are then written after
    early stopping, the loggers and weight averaging have recorded the epoch. Without it they are
    written at this plug-in's own EPOCH_END turn.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        monitor: str = "val/acc",
        mode: Literal["max", "min"] = "max",
        every_steps: Optional[int] = None,
        keep: int = 3,
        extra: Optional[dict[str, Any]] = None,
    ) -> None:
        self.directory = Path(directory)
        self.monitor, self.mode = monitor, mode
        self.every_steps, self.keep = every_steps, keep
        self.extra = dict(extra or {})
        self.best: Optional[float] = None
        self.best_epoch: Optional[int] = None
        self._mid_epoch = False  # updates were made since the last epoch end
        #: companion plug-in that writes the epoch-end checkpoints after every other plug-in
        self.at_epoch_end = EpochEndCheckpoint(self)

    def _save(self, state: State, name: str, *, mid_epoch: bool = False) -> Path:
        extra = dict(self.extra)
        getter = state.extra.get("eval_model_state")
        if callable(getter):
            extra["eval_model"] = getter()
        assert state.save_checkpoint is not None
        return state.save_checkpoint(self.directory / name, mid_epoch=mid_epoch, **extra)

    def on_step(self, state: State) -> None:
        self._mid_epoch = True
        if self.every_steps and state.step > 0 and state.step % self.every_steps == 0:
            self._save(state, f"step-{state.step:08d}.pt", mid_epoch=True)
            steps = sorted(p for p in self.directory.glob("step-*.pt") if _STEP_CKPT.match(p.name))
            for old in steps[: -self.keep]:
                old.unlink(missing_ok=True)

    def on_epoch_end(self, state: State) -> None:
        self._mid_epoch = False
        if not self.at_epoch_end.attached:
            self.save_epoch_end(state)

    def save_epoch_end(self, state: State) -> None:
        """Update the best value; write ``last.pt`` (and ``best.pt`` when the monitored metric improved)."""
        self._mid_epoch = False
        value = state.metrics.get(self.monitor)
        improved = value is not None and _better(value, self.best, self.mode)
        if improved:
            self.best, self.best_epoch = float(value), state.epoch
        # written at EPOCH_END, the checkpoints resume at the start of the next epoch
        self._save(state, "last.pt")
        if improved or (value is None and not (self.directory / "best.pt").exists()):
            self._save(state, "best.pt")

    def on_fit_end(self, state: State) -> None:
        # stopped inside an epoch (signal, non-finite policy): save where it stopped, to resume there
        if self._mid_epoch:
            self._save(state, "last.pt", mid_epoch=True)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.best, self.best_epoch = sd["best"], sd["best_epoch"]


class EpochEndCheckpoint(Plugin):
    """Writes :class:`Checkpointing`'s epoch-end checkpoints; add it as the first plug-in (see there)."""

    def __init__(self, owner: Checkpointing) -> None:
        self.owner = owner
        self.attached = False

    @property
    def key(self) -> str:
        return "EpochEndCheckpoint"

    def on_fit_start(self, state: State) -> None:
        self.attached = True  # it is in the trainer: the owner leaves the epoch-end save to it

    def on_epoch_end(self, state: State) -> None:
        self.owner.save_epoch_end(state)


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
            state.stop(f"early stopping: {self.rule.reason}")

    def state_dict(self) -> dict[str, Any]:
        return self.rule.state_dict()

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.rule.load_state_dict(sd)


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
            row = {"epoch": float(state.epoch), "step": float(state.step), "train/step_loss": float(state.loss.detach())}
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
        self.writer = None

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


class ProgressBar(Plugin):
    """A tqdm bar per epoch: ETA, loss, throughput and the latest validation accuracy."""

    def __init__(self, every_steps: int = 10, file: Any = None) -> None:
        self.every_steps = every_steps
        self.file = file
        self.bar = None
        self.last_val: Optional[float] = None
        self._t0 = 0.0
        self._n = 0

    def on_epoch_start(self, state: State) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=state.batches_per_epoch or None,
            initial=0,
            desc=f"epoch {state.epoch + 1}/{state.max_epochs}",
            unit="batch",
            leave=True,
            dynamic_ncols=True,
            file=self.file or sys.stderr,
        )
        self._t0, self._n = time.perf_counter(), 0

    def on_step(self, state: State) -> None:
        if self.bar is None:
            return
        self._n += state.accumulate
        if state.step % self.every_steps == 0:
            self.bar.update(self._n)
            self._n = 0
            post = {"loss": f"{float(state.loss.detach()):.4f}" if state.loss is not None else "-"}
            if self.last_val is not None:
                post["val_acc"] = f"{self.last_val:.4f}"
            self.bar.set_postfix(post, refresh=False)

    def on_epoch_end(self, state: State) -> None:
        if self.bar is None:
            return
        if self.bar.total:
            self.bar.update(self.bar.total - self.bar.n)
        m = state.metrics
        self.last_val = m.get("val/acc", self.last_val)
        post = {"loss": f"{m.get('train/loss', float('nan')):.4f}", "samples/s": f"{m.get('train/samples_per_s', 0):.0f}"}
        if "val/acc" in m:
            post["val_acc"] = f"{m['val/acc']:.4f}"
        self.bar.set_postfix(post)
        self.bar.close()
        self.bar = None

    def on_fit_end(self, state: State) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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
