"""``cosine``: a half cosine from the peak to ``min_lr`` (Loshchilov & Hutter 2017), then ``min_lr``."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from trickbag.optim.schedules.base import MinLR, RecipeSteps, Schedule, ScheduleConfig


class CosineSchedule(ScheduleConfig):
    """A half cosine from the peak LR down to min_lr at the last update."""

    name: Literal["cosine"] = "cosine"  # the LR curve
    min_lr: float = Field(0.0, ge=0.0)  # final learning rate


class CosineFactor(MinLR):
    """``min_lr + (base_lr - min_lr) * (1 + cos(pi x)) / 2``, ``x`` the progress of the anneal."""

    @classmethod
    def plan(cls, kw: dict[str, Any], warmup_steps: int) -> dict[str, Any]:
        return {"min_lr": cls.min_lr_option(kw)}

    @classmethod
    def check_groups(cls, plan: dict[str, Any], bases: list[float]) -> None:
        for i, base in enumerate(bases):
            if base < plan["min_lr"]:
                raise ValueError(
                    f"min_lr={plan['min_lr']} is above param_groups[{i}]['lr']={base}; "
                    "the cosine would raise that group's LR. Use a min_lr no larger than every group's LR"
                )

    def setup(self, *, min_lr: float) -> None:  # type: ignore[override]
        self.min_lr = float(min_lr)

    def unit(self, scale: float, x: float) -> float:
        return scale * (1.0 + math.cos(math.pi * x)) / 2.0


def _from_recipe(o: CosineSchedule, steps: RecipeSteps) -> dict[str, Any]:
    return {"min_lr": o.min_lr}


SCHEDULE = Schedule(
    name="cosine",
    options=CosineSchedule,
    keywords=frozenset({"min_lr"}),
    from_recipe=_from_recipe,
    factor=CosineFactor,
    needs_total=True,
    resume="replan",
)
