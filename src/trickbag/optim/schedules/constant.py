"""``constant``: the base LR after the warm-up, for ever."""

from __future__ import annotations

from typing import Literal

from trickbag.optim.schedules.base import Factor, Schedule, ScheduleConfig


class ConstantSchedule(ScheduleConfig):
    """The peak LR after the warm-up, to the end."""

    name: Literal["constant"] = "constant"  # the LR curve


SCHEDULE = Schedule(
    name="constant",
    options=ConstantSchedule,
    factor=Factor,  # the warm-up, then 1
    shorten_warmup=False,
    resume="keep",
)
