"""``plateau``: torch's ``ReduceLROnPlateau``: the LR multiplied by ``factor`` when the monitored metric stalls
(stepped once per epoch, with the metric)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from trickbag.errors import RecipeError
from trickbag.optim.schedules.base import RecipeSteps, Schedule, ScheduleConfig


class PlateauSchedule(ScheduleConfig):
    """The LR multiplied by gamma when the monitored metric stalls (once per epoch)."""

    name: Literal["plateau"] = "plateau"  # the LR curve
    gamma: float = Field(0.1, gt=0.0, le=1.0)  # the LR is multiplied by this at a plateau (1 is read as 0.1)
    patience: int = Field(2, ge=0)  # epochs without improvement before the LR is reduced


def _build(optimizer: Any, total_steps: int | None, kw: dict[str, Any]) -> Any:
    from torch.optim import lr_scheduler

    scheduler = lr_scheduler.ReduceLROnPlateau(optimizer, **kw)
    for group in optimizer.param_groups:
        group.setdefault("initial_lr", group["lr"])
    return scheduler


def _from_recipe(o: PlateauSchedule, steps: RecipeSteps) -> dict[str, Any]:
    if steps.warmup:
        raise RecipeError("schedule.warmup_epochs must be 0 with schedule.name=plateau")
    return {"factor": o.gamma if o.gamma < 1 else 0.1, "patience": o.patience, "mode": steps.mode}


SCHEDULE = Schedule(
    name="plateau",
    options=PlateauSchedule,
    keywords=frozenset({"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"}),
    from_recipe=_from_recipe,
    build=_build,
    no_warmup="build the warm-up separately",
    shorten_warmup=False,
    resume="keep",  # follows the metric
)
