"""``polynomial``: ``(1 - x) ** power`` from the peak to 0."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from trickbag.optim.schedules.base import Annealed, RecipeSteps, Schedule, ScheduleConfig, check_number


class PolynomialSchedule(ScheduleConfig):
    """(1 - progress) ** power from the peak LR down to 0 at the last update."""

    name: Literal["polynomial"] = "polynomial"  # the LR curve
    power: float = Field(1.0, gt=0.0)  # the exponent (1: linear)


class PolynomialFactor(Annealed):
    """``(1 - x) ** power``, ``x`` the progress of the anneal."""

    @classmethod
    def plan(cls, kw: dict[str, Any], warmup_steps: int) -> dict[str, Any]:
        power = kw.get("power", 1.0)
        check_number(power, "power", minimum=0.0)
        return {"power": float(power)}

    def setup(self, *, power: float) -> None:  # type: ignore[override]
        self.power = float(power)

    def unit(self, scale: float, x: float) -> float:
        return scale * (1.0 - x) ** self.power


def _from_recipe(o: PolynomialSchedule, steps: RecipeSteps) -> dict[str, Any]:
    return {"power": o.power}


SCHEDULE = Schedule(
    name="polynomial",
    options=PolynomialSchedule,
    keywords=frozenset({"power"}),
    from_recipe=_from_recipe,
    factor=PolynomialFactor,
    needs_total=True,
    resume="replan",
)
