"""Loggers and profiling beside metrics.csv and TensorBoard: Weights & Biases, torch.profiler.

* :class:`WandbLogger` (``log.wandb=true``, added by the run next to the CSV / TensorBoard
  loggers): the resolved recipe is the W&B run config; step rows (loss, LRs) every
  ``log.every_steps`` updates and every epoch metric, at ``step`` = optimizer updates.  Offline
  mode unless ``WANDB_MODE`` says otherwise (no account needed; ``wandb sync`` uploads later);
  files go under the run directory unless ``WANDB_DIR`` is set.  The W&B run id is kept in
  checkpoints, so a resumed run continues the same W&B run.
* :class:`ProfilePlugin` (``tricks.profile``): torch.profiler over a few optimizer updates; the
  Chrome trace (``chrome://tracing`` or https://ui.perfetto.dev) and the top-ops table go to
  ``<run dir>/profile/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from trickbag._optional import require
from trickbag.config import Recipe
from trickbag.train.plugin import Plugin
from trickbag.train.state import State
from trickbag.train.tricks import INTERACTION_CHECKS, register_trick

__all__ = ["WandbLogger", "ProfilePlugin"]


# --------------------------------------------------------------------------- Weights & Biases
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
                 project: Optional[str] = None) -> None:
        require("wandb", extra="wandb")  # fail before training, with the extra to install
        self.run_dir = Path(run_dir)
        self.config = config
        self.every_steps = every_steps
        self.project = project or os.environ.get("WANDB_PROJECT") or "trickbag"
        self.run: Any = None
        self.run_id: Optional[str] = None

    def on_fit_start(self, state: State) -> None:
        wandb = require("wandb", extra="wandb")
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
            mode=os.environ.get("WANDB_MODE", "offline"),  # type: ignore[arg-type]
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


def _check_wandb_installed(recipe: Recipe) -> None:
    if recipe.log.wandb:
        require("wandb", extra="wandb")  # before anything is written


INTERACTION_CHECKS.append(_check_wandb_installed)


# --------------------------------------------------------------------------- torch.profiler
class ProfilePlugin(Plugin):
    """Profile ``steps`` optimizer updates after ``wait`` + ``warmup`` with :mod:`torch.profiler`.

    Writes ``<run dir>/profile/trace.json`` (Chrome trace) and ``profile/ops.txt`` (top ops by
    self CPU time) on the main process; without a run directory nothing is written and the table
    is kept in ``state.extra["profile_table"]``.  A run shorter than the schedule is profiled up
    to its end.
    """

    name = "profile"

    def __init__(self, wait: int, warmup: int, steps: int, record_shapes: bool, profile_memory: bool,
                 with_stack: bool) -> None:
        self.wait, self.warmup, self.steps = wait, warmup, steps
        self.options = dict(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack)
        self.prof: Any = None
        self.done = False
        self._state: Optional[State] = None

    def on_fit_start(self, state: State) -> None:
        if self.done or not state.dist.is_main:
            return
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if state.device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self._state = state
        self.prof = profile(
            activities=activities,
            schedule=schedule(wait=self.wait, warmup=self.warmup, active=self.steps, repeat=1),
            on_trace_ready=self._write,
            **self.options,
        )
        self.prof.start()

    def _write(self, prof: Any) -> None:
        state = self._state
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
        if state is not None:
            state.extra["profile_table"] = table
            if state.run_dir is not None:
                out = Path(state.run_dir) / "profile"
                out.mkdir(parents=True, exist_ok=True)
                prof.export_chrome_trace(str(out / "trace.json"))
                (out / "ops.txt").write_text(table + "\n", encoding="utf-8")
        self.done = True

    def on_step(self, state: State) -> None:
        if self.prof is None:
            return
        self.prof.step()
        if self.done:
            self._stop()

    def _stop(self) -> None:
        prof, self.prof = self.prof, None
        if prof is not None:
            prof.stop()

    def on_fit_end(self, state: State) -> None:
        self._stop()

    def state_dict(self) -> dict[str, Any]:
        return {"done": self.done}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.done = bool(sd.get("done", False))


@register_trick("profile", "Profile a few updates with torch.profiler; Chrome trace and op table in <run>/profile/")
def _profile(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [ProfilePlugin(cfg.wait, cfg.warmup, cfg.steps, cfg.record_shapes, cfg.profile_memory, cfg.with_stack)]

