"""``wsd``: warmup-stable-decay, a trapezoid (Hu et al. 2024, Hägele et al. 2024): the peak LR until the last
``decay_fraction`` of the updates after the warm-up, then a decay of shape ``decay_shape`` to ``min_lr``."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from trickbag.optim.schedules.base import MinLR, RecipeSteps, Schedule, ScheduleConfig, check_number

#: the decay shapes of ``wsd``: the unit curve from 1 at the decay's start to 0 at its end
WSD_SHAPES = ("linear", "cosine", "1-sqrt")


class WsdSchedule(ScheduleConfig):
    """Warmup-stable-decay, the peak LR until the decay, then down to min_lr."""

    name: Literal["wsd"] = "wsd"  # the LR curve
    min_lr: float = Field(0.0, ge=0.0)  # final learning rate
    decay_fraction: float = Field(0.2, gt=0.0, le=1.0)  # share of the updates after warm-up spent decaying
    decay_shape: Literal["1-sqrt", "linear", "cosine"] = "1-sqrt"  # the decay's curve


class WsdFactor(MinLR):
    """1 in the stable phase; from the decay's start ``D`` on, ``min_lr + (base_lr - min_lr) * s(x)``."""

    @classmethod
    def plan(cls, kw: dict[str, Any], warmup_steps: int) -> dict[str, Any]:
        min_lr, fraction, shape = cls.min_lr_option(kw), kw.get("decay_fraction", 0.2), kw.get("decay_shape", "1-sqrt")
        check_number(fraction, "decay_fraction", minimum=0.0, maximum=1.0)
        if not fraction > 0:
            raise ValueError("decay_fraction must be > 0 (the share of the updates after warm-up spent decaying)")
        if shape not in WSD_SHAPES:
            raise ValueError(f"decay_shape must be one of {', '.join(WSD_SHAPES)}, got {shape!r}")
        return {"min_lr": min_lr, "decay_fraction": float(fraction), "decay_shape": shape}

    def setup(self, *, min_lr: float, decay_fraction: float, decay_shape: str) -> None:  # type: ignore[override]
        self.min_lr = float(min_lr)
        self.decay_fraction, self.decay_shape = float(decay_fraction), str(decay_shape)

    def first(self, total_steps: Any, t0: int) -> int:
        """The update the decay starts at, ``decay_fraction`` of the updates after the warm-up before
        ``total_steps`` (not before ``t0``)."""
        total = int(total_steps)
        return max(t0, self.warmup_steps, total - int(round(self.decay_fraction * (total - self.warmup_steps))))

    decay_start = first

    def unit(self, scale: float, x: float) -> float:
        if self.decay_shape == "cosine":
            return scale * (1.0 + math.cos(math.pi * x)) / 2.0
        if self.decay_shape == "linear":
            return scale * (1.0 - x)
        return scale * (1.0 - math.sqrt(x))

    def resume_note(self, t0: int, total_steps: int) -> str | None:
        decay = self.segments[-1][0]
        if decay > t0:  # still in the stable phase
            return f"the LR stays at its peak; the decay now starts at update {decay} and ends at update {total_steps}"
        return None


def _from_recipe(o: WsdSchedule, steps: RecipeSteps) -> dict[str, Any]:
    return {"min_lr": o.min_lr, "decay_fraction": o.decay_fraction, "decay_shape": o.decay_shape}


SCHEDULE = Schedule(
    name="wsd",
    options=WsdSchedule,
    keywords=frozenset({"min_lr", "decay_fraction", "decay_shape"}),
    from_recipe=_from_recipe,
    factor=WsdFactor,
    needs_total=True,
    resume="replan",  # in the stable phase: stays stable, the decay moves to the new end
)
