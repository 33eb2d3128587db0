"""``onecycle``: torch's ``OneCycleLR`` (Smith & Topin 2019) with ``max_lr`` = each group's LR, held at its
final LR after the end (:class:`~trickbag.optim.schedules.clamped.ClampedOneCycleLR`)."""

from __future__ import annotations

from typing import Any, Literal

from trickbag.optim.schedules.base import Schedule, ScheduleConfig, check_number


class OnecycleSchedule(ScheduleConfig):
    """torch's OneCycleLR up to the peak LR and down (its own warm-up: keep warmup_epochs 0)."""

    name: Literal["onecycle"] = "onecycle"  # the LR curve


def _build(optimizer: Any, total_steps: int | None, kw: dict[str, Any]) -> Any:
    from trickbag.optim.schedules.clamped import ClampedOneCycleLR

    if "pct_start" in kw:
        check_number(kw["pct_start"], "pct_start", minimum=0.0, maximum=1.0)
        kw["pct_start"] = float(kw["pct_start"])
    if kw.get("cycle_momentum") is None:
        kw["cycle_momentum"] = "betas" in optimizer.defaults or any(
            float(g.get("momentum", 0.0) or 0.0) > 0 for g in optimizer.param_groups
        )
    max_lr = [float(g["lr"]) for g in optimizer.param_groups]
    return ClampedOneCycleLR(optimizer, max_lr=max_lr, total_steps=total_steps, **kw)


SCHEDULE = Schedule(
    name="onecycle",
    options=OnecycleSchedule,
    keywords=frozenset({"pct_start", "anneal_strategy", "cycle_momentum", "base_momentum", "max_momentum",
                        "div_factor", "final_div_factor", "three_phase"}),
    build=_build,
    needs_total=True,
    no_warmup="use pct_start= for its own warm-up",
    resume="refuse",
    refuse_why="its phases are fixed fractions of the whole cycle; build a new schedule",
)
