"""``step``: the LR multiplied by ``gamma`` every ``step_size`` updates after the warm-up."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from trickbag.optim.schedules.base import Factor, RecipeSteps, Schedule, ScheduleConfig, check_gamma, check_int


class StepSchedule(ScheduleConfig):
    """The LR multiplied by gamma every step_epochs epochs after the warm-up."""

    name: Literal["step"] = "step"  # the LR curve
    step_epochs: float = Field(30.0, gt=0.0)  # decay every this many epochs
    gamma: float = Field(0.1, gt=0.0, le=1.0)  # decay factor


class StepFactor(Factor):
    """``gamma ** ((t - warmup_steps) // step_size)``."""

    @classmethod
    def plan(cls, kw: dict[str, Any], warmup_steps: int) -> dict[str, Any]:
        if "step_size" not in kw:
            raise ValueError("schedule 'step' needs step_size= (updates between LR decays)")
        check_int(kw["step_size"], "step_size", minimum=1)
        return {"step_size": kw["step_size"], "gamma": check_gamma(kw)}

    def setup(self, *, step_size: int, gamma: float) -> None:  # type: ignore[override]
        self.step_size, self.gamma = step_size, float(gamma)

    def main(self, t: int, seg: list[Any] | None) -> float:
        return self.gamma ** ((t - self.warmup_steps) // self.step_size)


def _from_recipe(o: StepSchedule, steps: RecipeSteps) -> dict[str, Any]:
    return {"step_size": max(1, int(round(o.step_epochs * steps.steps_per_epoch))), "gamma": o.gamma}


SCHEDULE = Schedule(
    name="step",
    options=StepSchedule,
    keywords=frozenset({"step_size", "gamma"}),
    from_recipe=_from_recipe,
    factor=StepFactor,
    resume="keep",  # a rule in updates: nothing to change
)
