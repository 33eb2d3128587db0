"""Checkpoint files of a run: ``last.pt`` and ``best.pt`` at epoch ends, ``step-N.pt`` every few updates.

Written at the CHECKPOINT event, after every other plug-in has recorded the point (early stopping,
the loggers, weight averaging), atomically, and only from finite weights: a model whose parameters
or buffers went NaN/Inf never overwrites a good checkpoint.
"""

from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Literal, TextIO

import torch

from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State, StopReason
from trickbag.train.sharded import prune_shards, shards_of, to_local

__all__ = ["Checkpointing", "list_checkpoints", "is_finite_model"]

_STEP_CKPT = re.compile(r"^step-(\d+)\.pt$")


def _better(value: float, best: float | None, mode: str) -> bool:
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


def is_finite_model(model: torch.nn.Module) -> bool:
    """Whether every floating parameter and buffer of ``model`` is finite (one host sync)."""
    tensors = [to_local(t.detach()) for t in [*model.parameters(), *model.buffers()]
               if t.is_floating_point() and to_local(t).numel()]
    if not tensors:
        return True
    norms = torch._foreach_norm(tensors, float("inf"))
    return bool(torch.isfinite(torch.stack([n.float().cpu() for n in norms])).all())


class Checkpointing(Plugin):
    """Write ``last.pt`` after every epoch, ``best.pt`` when the monitored metric improves, ``step-N.pt``
    every ``every_steps`` updates (keeping the newest ``keep``), and ``last.pt`` where a run was
    interrupted inside an epoch, so it resumes there.

    A run the non-finite guard stopped writes nothing at the stop, and its checkpoints that hold the
    weights whose forward pass gave the non-finite loss (those of the current update: finite, perhaps
    1e14, but not a state to continue from) move to ``diverged/`` beside the others, kept for a look but
    out of ``--resume``'s way: it continues from the last state whose next step was finite, or from the
    beginning when there is none. ``best.pt`` stays: its evaluation was finite.

    ``best.pt`` holds weights only (``resume=False`` of ``state.services.save_checkpoint``: no optimizer,
    scheduler or RNG state; ``--resume`` never reads it); ``last.pt`` and ``step-N.pt`` hold everything a
    resume needs. ``extra`` entries (e.g. the recipe) go into every checkpoint; ``state.eval_weights``
    (EMA, SWA) is saved as ``eval_model``: the weights that were evaluated and that ``trickbag eval`` /
    ``predict`` use. :attr:`written` maps each file name to the update it holds.
    """

    def __init__(self, directory: str | Path, *, monitor: str = "val/acc", mode: Literal["max", "min"] = "max",
                 every_steps: int | None = None, keep: int = 3, extra: dict[str, Any] | None = None,
                 out: TextIO | None = sys.stderr) -> None:
        self.directory = Path(directory)
        self.monitor, self.mode = monitor, mode
        self.every_steps, self.keep = every_steps, keep
        self.extra = dict(extra or {})
        self.out = out
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.written: dict[str, int] = {}
        self.refused = 0  # checkpoints not written because the weights were not finite

    def _save(self, state: State, name: str) -> bool:
        from trickbag.nn import unwrap

        services = state.services
        finite = services.weights_finite() if services is not None else is_finite_model(unwrap(state.model))
        if not finite:
            self.refused += 1
            if self.out is not None and self.refused == 1:
                kept = ", ".join(f"{n} (update {u})" for n, u in self.written.items()) or "none was written yet"
                print(f"trickbag: the weights are not finite at update {state.step}: {name} is not written; "
                      f"the finite checkpoints: {kept}", file=self.out, flush=True)
            return False
        assert services is not None  # it stores state.eval_weights (EMA, SWA) as eval_model
        services.save_checkpoint(self.directory / name, resume=name != "best.pt", **self.extra)
        self.written[name] = state.step
        return True

    def on_checkpoint(self, state: State) -> None:
        if state.epoch_done:
            self._epoch_end(state)
        elif state.should_stop and state.stop_reason is StopReason.NONFINITE:
            self._set_aside_diverged(state)
        elif state.should_stop:  # stopped inside the epoch: save where it stopped, to resume there
            self._save(state, "last.pt")
        elif self.every_steps and not state.step_skipped and state.step and state.step % self.every_steps == 0:
            if self._save(state, f"step-{state.step:08d}.pt"):
                steps = sorted(p for p in self.directory.glob("step-*.pt") if _STEP_CKPT.match(p.name))
                for old in steps[: -self.keep]:
                    old.unlink(missing_ok=True)
                    prune_shards(old, keep=None)
                    self.written.pop(old.name, None)

    def on_disk(self) -> dict[str, int]:
        """Every checkpoint in the directory (this session's and earlier ones') -> the update it holds."""
        from trickbag.train.checkpoint_files import CheckpointError, load_checkpoint

        found: dict[str, int] = {}
        paths = list_checkpoints(self.directory) + [p for p in [self.directory / "best.pt"] if p.exists()]
        for path in paths:
            m = _STEP_CKPT.match(path.name)
            step = int(m.group(1)) if m else self.written.get(path.name)
            if step is None:
                try:
                    step = int(load_checkpoint(path, mmap=True)["counters"]["step"])
                except (CheckpointError, KeyError, TypeError, ValueError):
                    continue
            found[path.name] = step
        return found

    def sizes(self) -> dict[str, int]:
        """Bytes of every checkpoint :meth:`on_disk` lists (file name -> size)."""
        out = {}
        for name in self.on_disk():
            try:
                out[name] = (self.directory / name).stat().st_size + sum(
                    f.stat().st_size for folder in shards_of(self.directory / name) for f in folder.iterdir())
            except OSError:
                continue
        return out

    def _set_aside_diverged(self, state: State) -> None:
        """Move the resume checkpoints holding update ``state.step`` (the weights that diverged) to ``diverged/``."""
        moved = []
        held = self.on_disk()
        for path in list_checkpoints(self.directory):
            if held.get(path.name) == state.step:
                (self.directory / "diverged").mkdir(exist_ok=True)
                for folder in shards_of(path):  # a sharded checkpoint's shards move with it
                    os.replace(folder, self.directory / "diverged" / folder.name)
                os.replace(path, self.directory / "diverged" / path.name)
                self.written.pop(path.name, None)
                moved.append(path.name)
        if moved and self.out is not None:
            print(
                f"trickbag: {', '.join(moved)} held the weights that gave the non-finite loss: moved to "
                f"{self.directory / 'diverged'} (--resume continues from an earlier state)",
                file=self.out,
                flush=True,
            )

    def _epoch_end(self, state: State) -> None:
        value = state.metrics.get(self.monitor)
        improved = value is not None and _better(value, self.best, self.mode)
        best_before = (self.best, self.best_epoch)
        if improved and value is not None:  # recorded before last.pt is written: a resume from it knows this best
            self.best, self.best_epoch = float(value), state.epoch
        # written after EPOCH_END, the checkpoints resume at the start of the next epoch; best.pt first: a
        # crash between the two writes resumes from the previous last.pt and redoes this epoch (best.pt
        # included), where the other order would leave an old best.pt that the resumed run never rewrites
        if improved or (value is None and not (self.directory / "best.pt").exists()):
            if not self._save(state, "best.pt"):
                self.best, self.best_epoch = best_before  # not finite: nothing of this epoch is kept
                return
        if not self._save(state, "last.pt"):
            self.best, self.best_epoch = best_before

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_epoch": self.best_epoch}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.best, self.best_epoch = sd["best"], sd["best_epoch"]
