"""The resume contract: what ``trickbag train --resume RUN key=value ...`` may change, and how.

A resumed run continues what the checkpoint holds, so only overrides that can change safely mid-run
are accepted (:data:`SAFE`); every other change is refused in one line naming the key. Two of them
change the training itself, and say so when the run starts:

* ``train.epochs`` — longer or shorter (not below the epochs already done): the LR schedule is
  re-planned from the current update to end at the new last update (:func:`trickbag.optim.replan_schedule`),
  the LR never climbs back. A schedule whose anneal had already ended (a finished run trained longer)
  restarts instead of training at its floor (often 0): a linear warm-up over a tenth of the extra updates
  to :data:`RESTART_PEAK` of the peak LR (to the new ``optim.lr`` when it is given too), then the same
  anneal to the floor at the new end. What a schedule does is its module's rule
  (``Schedule.resume`` in :mod:`trickbag.optim.schedules`): ``multistep`` and ``onecycle`` cannot be
  re-planned, and a finished run with them says how to train on from its weights in a new run;
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

__all__ = ["SAFE", "RESTART_PEAK", "changed_keys", "check_resume", "apply_resume", "log_resume", "restart_warmup",
           "train_longer_hint"]

#: a finished run trained longer restarts its schedule at this fraction of the recipe's peak LR (``optim.lr``
#: given with the new ``train.epochs`` sets the peak instead): enough to move the weights, small enough to keep
#: most of what the anneal reached
RESTART_PEAK = 0.1

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
    "schedule.decay_fraction": "wsd: re-plans the decay from the current update (1.0: it starts now, a cooldown; "
                               "trickbag cooldown RUN branches one off)",
    "dist.nproc": "the number of processes from here on (at an epoch's end only; the effective batch changes with it "
                  "unless data.batch_size does too)",
    "train.activation_checkpointing": "memory and time only, never the result (e.g. after running out of memory)",
    "train.activation_checkpointing_every": "memory and time only",
    "train.micro_batch_size": "memory and time (e.g. after running out of memory): the updates' gradients stay the "
                              "whole batches' (BatchNorm sees micro-batches)",
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
    """``{dotted key: (old, new)}`` for every value that differs between two recipe dicts.

    A key the old recipe does not have (a run from a trickbag version before the key existed) trained with
    the key's default, so it has changed only when the new value is not that default."""
    a, b = _flat(old), _flat(new)
    defaults = _schema_defaults()
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
            if a.get(k, defaults.get(k)) != b.get(k) and k not in _IGNORED}


def _schema_defaults() -> dict[str, Any]:
    """Every key's default, each schedule's keys included (a key is one schedule's or shares its default)."""
    from trickbag.optim.schedules import sections
    from trickbag.recipe import recipe_from_dict

    out: dict[str, Any] = {}
    for name in sections():
        out.update(_flat(recipe_from_dict({"schedule": {"name": name}}).model_dump(mode="json")))
    return out | _flat(recipe_from_dict({}).model_dump(mode="json"))  # the default schedule's values win


def _safe(key: str) -> bool:
    return any(key == s or (s.endswith(".") and key.startswith(s)) for s in SAFE)


def check_resume(
    old: dict[str, Any], new: dict[str, Any], epochs_done: int, run_dir: Path
) -> dict[str, tuple[Any, Any]]:
    """The changes a resume asks for; :class:`RecipeError` (one line) for one that cannot change mid-run.

    ``old``, the checkpoint's recipe, may come from a trickbag before each schedule had its own keys: the
    other schedules' keys it holds are dropped first (they did nothing in that run)."""
    from trickbag.recipe import stored_recipe

    changes = changed_keys(stored_recipe(old), new)
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


def restart_warmup(extra_updates: int) -> int:
    """Updates of the warm-up of a restarted schedule: a tenth of the extra updates, at least 1 (0 for a single one).

    >>> restart_warmup(48), restart_warmup(5), restart_warmup(1)
    (4, 1, 0)
    """
    return min(max(1, extra_updates // 10), extra_updates - 1)


def train_longer_hint(run_dir: Path, recipe: Any, epochs_done: int) -> str:
    """The command that trains a finished run longer, and what it does to the LR schedule."""
    from trickbag.optim.schedules import SCHEDULES

    more = epochs_done + max(1, epochs_done // 2)
    name = recipe.schedule.name
    rule = SCHEDULES[name].resume if name in SCHEDULES else "keep"
    if rule == "refuse":
        return (f"trickbag train {run_dir}/recipe.yaml run.name={run_dir.name}-more train.epochs={more - epochs_done} "
                f"model.weights={run_dir}/checkpoints/last.pt (schedule.name={name} cannot be extended, so a new run "
                f"starts from its weights)")
    what = ("the schedule restarts at a tenth of its peak LR, add optim.lr=LR to choose the peak"
            if rule == "replan" else f"schedule.name={name} goes on")
    return f"trickbag train --resume {run_dir} train.epochs={more} ({what})"


def apply_resume(trainer: Any, ctx: Any, changes: dict[str, tuple[Any, Any]],
                 world_before: int | None = None) -> list[str]:
    """Re-plan the schedule and scale the LR as ``changes`` ask, after the checkpoint was loaded; the
    lines that say what happened. ``world_before``: the number of processes that wrote the checkpoint; when it
    differs, an epoch has another number of updates, so the schedule is re-planned for the epochs left."""
    from trickbag.optim import scale_lr

    s, notes = trainer.state, []
    if "optim.lr" in changes:
        old, new = changes["optim.lr"]
        scale_lr(s.optimizer, s.scheduler, new / old)
        notes.append(f"optim.lr {old:g} -> {new:g}: every group's learning rate is scaled by {new / old:.4g} from "
                     f"update {s.step}")
    if "schedule.decay_fraction" in changes and s.scheduler is not None:  # wsd: where the decay starts
        for factor in getattr(s.scheduler, "lr_lambdas", []):
            if hasattr(factor, "decay_fraction"):
                factor.decay_fraction = float(changes["schedule.decay_fraction"][1])
        epochs = ctx.recipe.train.epochs
        changes = {**changes, "train.epochs": changes.get("train.epochs", (epochs, epochs))}
    world = ctx.dist.world_size
    if world_before is not None and world_before != world and s.scheduler is not None:
        epochs = ctx.recipe.train.epochs
        changes = {**changes, "train.epochs": changes.get("train.epochs", (epochs, epochs))}
        notes.append(f"{world_before} -> {world} processes: {ctx.steps_per_epoch} updates per epoch from here on")
        notes.append(_replan(s, ctx, changes, total=s.step + (epochs - s.epoch) * ctx.steps_per_epoch))
    elif "train.epochs" in changes and s.scheduler is not None:
        notes.append(_replan(s, ctx, changes))
    return notes


def _replan(s: Any, ctx: Any, changes: dict[str, tuple[Any, Any]], total: int | None = None) -> str:
    """Re-plan the schedule to the new ``train.epochs`` (a warm restart when it had ended), or to end at update
    ``total``; the line saying so."""
    from trickbag.optim import replan_schedule

    old, new = changes["train.epochs"]
    total, t0 = total if total is not None else ctx.steps_per_epoch * new, s.step
    floor = float(s.optimizer.param_groups[0]["lr"])
    peak = 1.0 if "optim.lr" in changes else RESTART_PEAK
    warm = restart_warmup(total - t0) if total > t0 else 0
    try:
        restarted = replan_schedule(s.scheduler, total, restart=peak, restart_warmup=warm)
    except ValueError as exc:
        raise RecipeError(f"train.epochs cannot change on resume with schedule.name={ctx.recipe.schedule.name}: "
                          f"{exc}; to train on, start a new run from its weights (model.weights="
                          f"RUN/checkpoints/last.pt)") from None
    if restarted:
        top = s.scheduler.lr_lambdas[0](t0 + warm) * s.scheduler.base_lrs[0]
        given = "the new optim.lr" if "optim.lr" in changes else f"{peak:g} x the peak LR; optim.lr=LR sets it"
        return (f"train.epochs {old} -> {new}: the schedule had ended (LR {floor:g}), so it restarts: a warm-up over "
                f"{warm} update{'s' if warm != 1 else ''} to {top:g} ({given}), then a new {ctx.recipe.schedule.name} "
                f"anneal to update {total}")
    note = s.scheduler.lr_lambdas[0].resume_note(t0, total) if hasattr(s.scheduler, "lr_lambdas") else None
    if note is not None:  # the schedule's own account (wsd in its stable phase)
        return f"train.epochs {old} -> {new}: {note}"
    return f"train.epochs {old} -> {new}: the schedule is re-planned from update {t0} to end at update {total}"


def log_resume(run_dir: Path, checkpoint: str | None, position: str, changes: dict[str, tuple[Any, Any]],
               notes: list[str] | None = None) -> None:
    """Append one JSON line to ``<run>/resumes.log``: when, from which checkpoint, where, what changed and
    what that did (``notes``: the lines printed when the run resumed, e.g. a restarted schedule)."""
    entry = {"at": datetime.datetime.now().isoformat(timespec="seconds"), "checkpoint": checkpoint,
             "position": position, "changes": {k: list(v) for k, v in changes.items()}, "notes": list(notes or [])}
    with open(Path(run_dir) / "resumes.log", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
