"""What every learning-rate schedule module is made of: its :class:`Schedule` entry, the per-group
:class:`Factor` of the ``LambdaLR`` schedules, and the argument checks they share.

Nothing here imports torch: the recipe reads the schedules' option sections (``trickbag.recipe``) before
anything heavy is loaded; the torch side (:class:`~trickbag.optim.lr_scheduler.LRSchedule`,
:func:`~trickbag.optim.lr_scheduler.build_scheduler`) takes a schedule's factor or ``build`` from here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, Literal

from trickbag.config import ScheduleConfig

__all__ = ["Schedule", "Factor", "Annealed", "MinLR", "RecipeSteps", "ScheduleConfig", "check_int", "check_number",
           "check_gamma"]


@dataclasses.dataclass(frozen=True)
class RecipeSteps:
    """What a schedule's recipe options are converted with: the run's lengths in optimizer updates."""

    warmup: int  # warm-up updates
    total: int  # updates of the whole run
    steps_per_epoch: int
    mode: str  # "max" / "min": whether the monitored metric should rise or fall (plateau)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """One learning-rate schedule: the registry entry its module ends with (``SCHEDULE = Schedule(...)``).

    Args:
        name: the name ``build_scheduler`` and ``schedule.name`` take.
        options: its recipe section (``schedule.*`` keys), a :class:`~trickbag.config.ScheduleConfig`
            subclass whose ``name`` is ``Literal[name]``.
        keywords: the keyword options ``build_scheduler`` accepts for it (beyond ``total_steps`` / ``warmup_*``).
        from_recipe: ``(options section, RecipeSteps) -> build_scheduler keyword options``: epochs and
            fractions of the recipe converted to optimizer updates.
        factor: the :class:`Factor` subclass of an :class:`~trickbag.optim.lr_scheduler.LRSchedule` schedule;
            ``None`` when ``build`` makes another scheduler.
        build: ``(optimizer, total_steps, options) -> scheduler`` for the schedules that are not an
            ``LRSchedule`` (called after the shared checks).
        needs_total: ``total_steps`` is required.
        no_warmup: why it cannot take ``warmup_steps`` (the end of the error line); ``None``: it can.
        shorten_warmup: a recipe warm-up as long as the run is cut to half the run (else the checks refuse it).
        resume: what a new ``train.epochs`` does on resume: ``replan`` (the anneal is re-planned to the new end,
            restarted when it was over), ``keep`` (nothing to change: the rule goes on) or ``refuse``.
        refuse_why: with ``resume="refuse"``: why it cannot be re-planned (the end of the error line).
    """

    name: str
    options: type[ScheduleConfig]
    keywords: frozenset[str] = frozenset()
    from_recipe: Callable[[Any, RecipeSteps], dict[str, Any]] = lambda options, steps: {}
    factor: type[Factor] | None = None
    build: Callable[[Any, int | None, dict[str, Any]], Any] | None = None
    needs_total: bool = False
    no_warmup: str | None = None
    shorten_warmup: bool = True
    resume: Literal["replan", "keep", "refuse"] = "keep"
    refuse_why: str = ""


# --------------------------------------------------------------------------- argument checks
def check_int(value: Any, name: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_number(value: Any, name: str, *, minimum: float, maximum: float = math.inf) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not minimum <= value <= maximum
    ):
        allowed = f">= {minimum}" if maximum == math.inf else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be a number {allowed}, got {value!r}")


def check_gamma(kw: dict[str, Any]) -> float:
    gamma = kw.get("gamma", 0.1)
    check_number(gamma, "gamma", minimum=0.0)
    return float(gamma)


# --------------------------------------------------------------------------- the per-group factor
class Factor:
    """LR factor of one param group of :class:`~trickbag.optim.lr_scheduler.LRSchedule`: ``lr(t) = base_lr *
    factor(t)``; a linear warm-up over ``warmup_steps`` updates from ``warmup_start``, then :meth:`main`.

    Its ``__dict__`` holds plain data only (``LambdaLR.state_dict`` saves it and ``load_state_dict``
    restores it). A subclass sets its options in :meth:`setup` (validated by :meth:`plan` first).
    """

    #: reaches an end value at ``total_steps`` and stays there (described by ``segments``, re-planned)
    annealed = False

    def __init__(self, *, name: str, base_lr: float, warmup_steps: int, warmup_start: float,
                 total_steps: int | None, **options: Any) -> None:
        self.name = name
        self.base_lr = float(base_lr)
        self.warmup_steps = int(warmup_steps)
        self.warmup_start = float(warmup_start)
        self.total_steps = total_steps
        self.setup(**options)
        self.segments: list[list[Any]] = [[self.first(total_steps, self.warmup_steps), 1.0, total_steps]] \
            if self.annealed else []

    @classmethod
    def plan(cls, kw: dict[str, Any], warmup_steps: int) -> dict[str, Any]:
        """The validated options (keyword arguments of :meth:`setup`) from ``build_scheduler``'s ``kw``."""
        return {}

    def setup(self, **options: Any) -> None:
        """Store the options :meth:`plan` validated."""

    def first(self, total_steps: Any, t0: int) -> int:
        """The update the main (annealed) phase starts at when it must end at ``total_steps`` (from ``t0`` on)."""
        return self.warmup_steps

    @classmethod
    def check_groups(cls, plan: dict[str, Any], bases: list[float]) -> None:
        """Refuse param groups whose base LRs the schedule cannot follow (when it is built)."""

    def check_base(self, base_lr: float) -> None:
        """Refuse the base LR of a param group added later that the schedule cannot follow."""

    def with_base(self, base_lr: float) -> Factor:
        """The same plan (segments included) for a param group with base LR ``base_lr``."""
        self.check_base(base_lr)
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.base_lr = float(base_lr)
        for key, value in self.__dict__.items():
            if isinstance(value, list):
                other.__dict__[key] = [list(v) if isinstance(v, list) else v for v in value]
        return other

    # -- evaluation ------------------------------------------------------------------------

    def _segment(self, t: int) -> list[Any] | None:
        found = None
        for seg in self.segments:
            if seg[0] <= t:
                found = seg
        return found

    def __call__(self, t: int) -> float:
        seg = self._segment(t)
        w = self.warmup_steps
        if seg is None and t < w:
            s = self.warmup_start
            return s + (1.0 - s) * t / w
        return self.main(t, seg)

    def main(self, t: int, seg: list[Any] | None) -> float:
        """The factor at update ``t`` after the warm-up (``seg``: the segment in force, annealed schedules)."""
        return 1.0

    # -- re-planning -----------------------------------------------------------------------

    def ended(self, t: int) -> bool:
        """Whether the anneal is over at update ``t`` (the factor sits at its end value)."""
        return False

    def replan(self, t0: int, total_steps: int, restart: float | None = None, restart_warmup: int = 0) -> None:
        """From update ``t0`` on, reach the end value at ``total_steps`` (nothing to do unless annealed)."""

    def resume_note(self, t0: int, total_steps: int) -> str | None:
        """What a re-plan to ``total_steps`` at ``t0`` did, when the generic line would mislead (else None)."""
        return None


class Annealed(Factor):
    """A factor that anneals from the peak to an end value at ``total_steps`` and stays there.

    The curve is described by segments ``[start, scale, end]``, base-LR free: from update ``start`` on
    (the segment added last among those that have started wins), the annealed part is
    ``G(t) = scale * shape(x)`` with ``x = min(1, (t - start) / (end - start))`` and ``shape`` the unit
    curve from 1 to 0 (:meth:`unit`), and the factor is :meth:`end_value` of ``G``. Built with
    ``[[first, 1.0, total_steps]]``; :meth:`replan` appends segments. A warm restart's segment has a
    fourth entry, ``warm``: for ``start <= t < start + warm``, ``G(t) = scale * (t - start + 1) / (warm + 1)``,
    and the anneal spans ``start + warm .. end``.
    """

    annealed = True

    def unit(self, scale: float, x: float) -> float:
        """``scale`` times the unit curve at ``x`` in [0, 1] (1 at 0, 0 at 1)."""
        raise NotImplementedError

    def end_value(self, g: float) -> float:
        """The factor for the annealed part ``g`` (1 at the peak, 0 at the end)."""
        return g

    def _unit(self, t: int, seg: list[Any]) -> float:
        start, scale, end = seg[:3]
        warm = int(seg[3]) if len(seg) > 3 else 0  # a restart's warm-up (see replan)
        if t < start + warm:
            return scale * (t - start + 1) / (warm + 1)
        start += warm
        x = 1.0 if end <= start or t >= end else (t - start) / (end - start)
        return self.unit(scale, x)

    def main(self, t: int, seg: list[Any] | None) -> float:
        if seg is None:  # before the anneal starts (wsd: the stable phase)
            return 1.0
        return self.end_value(self._unit(t, seg))

    def ended(self, t: int) -> bool:
        seg = self._segment(t)
        return seg is not None and t >= seg[2]

    def replan(self, t0: int, total_steps: int, restart: float | None = None, restart_warmup: int = 0) -> None:
        seg = self._segment(t0)
        if seg is not None and t0 >= seg[2]:
            if restart is not None and total_steps > t0:  # a warm restart: warm-up, then the anneal again
                self.segments = self.segments + [[t0, float(restart), total_steps, int(restart_warmup)]]
                self.total_steps = total_steps
            return  # else the anneal is over: stay at the floor
        if total_steps <= t0:
            self.segments = self.segments + [[t0, 0.0, t0]]
            self.total_steps = t0
            return
        if seg is None:  # warming up (wsd: or stable): the warm-up continues, the main phase spans the new total
            if total_steps <= self.warmup_steps:
                raise ValueError(
                    f"total_steps={total_steps} ends inside the warm-up ({self.warmup_steps} updates, now at update "
                    f"{t0}); give total_steps > {self.warmup_steps}, or <= {t0} to go to the floor at once"
                )
            self.segments = [[self.first(total_steps, t0), 1.0, total_steps]]  # wsd: stable goes on, decay moves
        else:
            self.segments = self.segments + [[t0, self._unit(t0, seg), total_steps]]
        self.total_steps = total_steps


class MinLR(Annealed):
    """An anneal to an absolute ``min_lr`` shared by all groups: factor ``(min_lr + (base_lr - min_lr) * G) /
    base_lr`` (cosine, wsd)."""

    min_lr: float

    @classmethod
    def min_lr_option(cls, kw: dict[str, Any]) -> float:
        min_lr = kw.get("min_lr", 0.0)
        check_number(min_lr, "min_lr", minimum=0.0)
        return float(min_lr)

    def check_base(self, base_lr: float) -> None:
        if base_lr < self.min_lr:
            raise ValueError(
                f"min_lr={self.min_lr} of the cosine schedule is above the new group's lr={base_lr}; "
                "the cosine would raise its LR. Give the group an lr no smaller than min_lr"
            )

    def end_value(self, g: float) -> float:
        if self.base_lr <= 0.0:
            return g  # lr = 0 * factor = 0 whatever the factor
        return (self.min_lr + (self.base_lr - self.min_lr) * g) / self.base_lr
