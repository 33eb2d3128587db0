"""``multistep``: the LR multiplied by ``gamma`` at each milestone (absolute update counts)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from trickbag.optim.schedules.base import Factor, RecipeSteps, Schedule, ScheduleConfig, check_gamma, check_int


class MultistepSchedule(ScheduleConfig):
    """The LR multiplied by gamma at each milestone."""

    name: Literal["multistep"] = "multistep"  # the LR curve
    milestones: list[float] = Field(default_factory=lambda: [0.5, 0.75])  # fractions of training
    gamma: float = Field(0.1, gt=0.0, le=1.0)  # decay factor at each milestone


class MultistepFactor(Factor):
    """``gamma ** #{milestones <= t}``."""

    @classmethod
    def plan(cls, kw: dict[str, Any], warmup_steps: int) -> dict[str, Any]:
        milestones = kw.get("milestones")
        if milestones is None:
            raise ValueError("schedule 'multistep' needs milestones= (a list of update counts)")
        milestones = list(milestones)
        for m in milestones:
            check_int(m, "milestones[...]", minimum=warmup_steps + 1)
        if milestones != sorted(milestones):
            raise ValueError(f"milestones must be increasing, got {milestones}")
        return {"milestones": milestones, "gamma": check_gamma(kw)}

    def setup(self, *, milestones: list[int], gamma: float) -> None:  # type: ignore[override]
        self.milestones, self.gamma = list(milestones), float(gamma)

    def main(self, t: int, seg: list[Any] | None) -> float:
        return self.gamma ** sum(1 for m in self.milestones if m <= t)


def _from_recipe(o: MultistepSchedule, steps: RecipeSteps) -> dict[str, Any]:
    return {"milestones": sorted({max(steps.warmup + 1, int(round(m * steps.total))) for m in o.milestones}),
            "gamma": o.gamma}


SCHEDULE = Schedule(
    name="multistep",
    options=MultistepSchedule,
    keywords=frozenset({"milestones", "gamma"}),
    from_recipe=_from_recipe,
    factor=MultistepFactor,
    resume="refuse",
    refuse_why="its milestones are absolute update counts; build a new schedule with the milestones you want",
)
