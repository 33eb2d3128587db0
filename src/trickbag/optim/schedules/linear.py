"""``linear``: a straight line from the peak to ``end_factor`` times the peak, then that."""

from __future__ import annotations

from typing import Any, Literal

from trickbag.optim.schedules.base import Annealed, Schedule, ScheduleConfig, check_number


class LinearSchedule(ScheduleConfig):
    """A straight line from the peak LR down to 0 at the last update."""

    name: Literal["linear"] = "linear"  # the LR curve


class LinearFactor(Annealed):
    """``end_factor + (1 - end_factor) * (1 - x)``, ``x`` the progress of the anneal."""

    @classmethod
    def plan(cls, kw: dict[str, Any], warmup_steps: int) -> dict[str, Any]:
        end_factor = kw.get("end_factor", 0.0)
        check_number(end_factor, "end_factor", minimum=0.0, maximum=1.0)
        return {"end_factor": float(end_factor)}

    def setup(self, *, end_factor: float) -> None:  # type: ignore[override]
        self.end_factor = float(end_factor)

    def unit(self, scale: float, x: float) -> float:
        return scale * (1.0 - x)

    def end_value(self, g: float) -> float:
        return self.end_factor + (1.0 - self.end_factor) * g


SCHEDULE = Schedule(
    name="linear",
    options=LinearSchedule,
    keywords=frozenset({"end_factor"}),
    factor=LinearFactor,
    needs_total=True,
    resume="replan",
)
