"""The resume contract: what ``trickbag train --resume RUN key=value ...`` may change, and how.

A resumed run continues what the checkpoint holds, so only overrides that can change safely mid-run
are accepted (:data:`SAFE`); every other change is refused in one line naming the key. Two of them
change the training itself, and say so when the run starts:

* ``train.epochs`` — longer or shorter (not below the epochs already done): the LR schedule is
  re-planned from the current update to end at the new last update (:func:`trickbag.optim.replan_schedule`);
  a schedule that had already ended stays at its floor, it never climbs back;
* ``optim.lr`` — every param group's learning rate is scaled by new / old from here on
  (:func:`trickbag.optim.scale_lr`), e.g. a lower LR after the loss diverged.

``recipe.yaml`` is rewritten to what runs from now on and each resume appends its changes to
``resumes.log`` in the run directory.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from trickbag.errors import RecipeError

__all__ = ["SAFE", "changed_keys", "check_resume", "apply_resume", "log_resume"]

#: keys (or key prefixes ending in '.') a resume may change, and what the change does
SAFE: dict[str, str] = {
    "train.epochs": "re-plans the LR schedule from the current update",
    "optim.lr": "scales every group's learning rate from the current update",
    "log.": "logging",
    "run.progress": "the progress bar",
    "run.plots": "the plots",
    "train.threads": "CPU threads",
    "train.device": "the device",
    "data.num_workers": "loader workers",
    "data.pin_memory": "pinned memory",
    "data.eval_batch_size": "the evaluation batch size",
    "train.checkpoint_every_steps": "step checkpoints",
    "train.keep_checkpoints": "step checkpoints kept",
    "train.nonfinite": "the non-finite policy",
    "train.max_nonfinite": "the non-finite policy",
    "train.early_stopping_patience": "early stopping",
    "train.early_stopping_min_delta": "early stopping",
    "train.plugins": "your own plug-ins",
    "dist.timeout_s": "the process-group timeout",
    "description": "the description",
}
_IGNORED = ("run.name", "run.dir", "name")


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v and all(isinstance(x, str) for x in v) and k not in ("kwargs", "bins", "lr_scale"):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def changed_keys(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{dotted key: (old, new)}`` for every value that differs between two recipe dicts."""
    a, b = _flat(old), _flat(new)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and k not in _IGNORED}


def _safe(key: str) -> bool:
    return any(key == s or (s.endswith(".") and key.startswith(s)) for s in SAFE)


def check_resume(
    old: dict[str, Any], new: dict[str, Any], epochs_done: int, run_dir: Path
) -> dict[str, tuple[Any, Any]]:
    """The changes a resume asks for; :class:`RecipeError` (one line) for one that cannot change mid-run."""
    changes = changed_keys(old, new)
    unsafe = [k for k in changes if not _safe(k)]
    if unsafe:
        k = unsafe[0]
        raise RecipeError(
            f"--resume cannot change {k} ({changes[k][0]!r} -> {changes[k][1]!r}): the checkpoint was trained with "
            f"it; allowed on resume: {', '.join(s.rstrip('.') for s in SAFE)}; for other changes start a new run "
            f"(model.weights={run_dir}/checkpoints/best.pt to start from its weights)"
        )
    if "train.epochs" in changes and changes["train.epochs"][1] < epochs_done:
        raise RecipeError(f"train.epochs={changes['train.epochs'][1]} is below the {epochs_done} epochs {run_dir} "
                          f"has already trained; give train.epochs >= {epochs_done}")
    return changes


def apply_resume(trainer: Any, ctx: Any, changes: dict[str, tuple[Any, Any]]) -> list[str]:
    """Re-plan the schedule and scale the LR as ``changes`` ask, after the checkpoint was loaded; the
    lines that say what happened."""
    from trickbag.optim import replan_schedule, scale_lr

    s, notes = trainer.state, []
    if "optim.lr" in changes:
        old, new = changes["optim.lr"]
        scale_lr(s.optimizer, s.scheduler, new / old)
        notes.append(f"optim.lr {old:g} -> {new:g}: every group's learning rate is scaled by {new / old:.4g} from "
                     f"update {s.step}")
    if "train.epochs" in changes and s.scheduler is not None:
        old, new = changes["train.epochs"]
        total = ctx.steps_per_epoch * new
        try:
            replan_schedule(s.scheduler, total)
        except ValueError as exc:
            raise RecipeError(f"train.epochs cannot change on resume with schedule.name={ctx.recipe.schedule.name}: "
                              f"{exc}") from None
        ended = s.step >= ctx.steps_per_epoch * old
        how = ("the schedule had ended and stays at its final LR" if ended else
               f"the schedule is re-planned from update {s.step} to end at update {total}")
        if ended and all(g["lr"] == 0 for g in s.optimizer.param_groups):
            how += (" of 0: the extra epochs leave the weights as they are; to train on, start a new run from them "
                    "(model.weights=RUN/checkpoints/last.pt)")
        notes.append(f"train.epochs {old} -> {new}: {how}")
    return notes


def log_resume(run_dir: Path, checkpoint: str | None, position: str, changes: dict[str, tuple[Any, Any]]) -> None:
    """Append one JSON line to ``<run>/resumes.log``: when, from which checkpoint, where, what changed."""
    entry = {"at": datetime.datetime.now().isoformat(timespec="seconds"), "checkpoint": checkpoint,
             "position": position, "changes": {k: list(v) for k, v in changes.items()}}
    with open(Path(run_dir) / "resumes.log", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
