"""The learning-rate schedules, one module each, and their registry.

A schedule module holds everything about one schedule: its recipe section (a
:class:`~trickbag.config.ScheduleConfig` subclass: ``name`` plus its own keys, each with its help as the
comment on its line), its curve (a :class:`~trickbag.optim.schedules.base.Factor` subclass, or a ``build``
for a torch scheduler), its conversion from recipe epochs to updates, and its rule for a resume that
changes ``train.epochs``; it ends with ``SCHEDULE = Schedule(...)``. Adding a schedule is that module and
its name in the import line and in :data:`MODULES` below (the order names are listed in).
``build_scheduler``, ``schedule`` in the recipe (a union discriminated by ``schedule.name``, each schedule
with only its own keys), ``trickbag recipes --keys`` and the resume rules are generated from
:data:`SCHEDULES`. Nothing here imports torch (a torch scheduler is imported when it is built).
"""

from __future__ import annotations

from typing import Any, Literal

from trickbag.config import ScheduleConfig
from trickbag.optim.schedules import constant, cosine, linear, multistep, onecycle, plateau, polynomial, step, wsd
from trickbag.optim.schedules.base import Schedule

__all__ = ["MODULES", "SCHEDULES", "NAMES", "DEFAULT", "NoSchedule", "sections", "settle_schedule", "Schedule"]

#: the schedule modules, in the order their names are listed
MODULES = (constant, step, multistep, cosine, onecycle, linear, polynomial, plateau, wsd)
#: name -> its registry entry
SCHEDULES: dict[str, Schedule] = {m.SCHEDULE.name: m.SCHEDULE for m in MODULES}
#: the names ``build_scheduler`` takes
NAMES: tuple[str, ...] = tuple(SCHEDULES)
#: ``schedule.name`` of a recipe that names none
DEFAULT = "cosine"


class NoSchedule(ScheduleConfig):
    """No schedule, the optimizer keeps its LR (e.g. a schedule-free optimizer)."""

    name: Literal["none"] = "none"  # the LR curve


def sections() -> dict[str, type[ScheduleConfig]]:
    """``schedule.name`` -> its recipe section, every schedule and ``none``."""
    return {**{name: s.options for name, s in SCHEDULES.items()}, "none": NoSchedule}


def _is_default(key: str, value: Any, takers: list[type[ScheduleConfig]]) -> bool:
    return any(value == t.model_fields[key].get_default(call_default_factory=True) for t in takers)


def settle_schedule(section: Any, *, stored: bool = False) -> Any:
    """A recipe's ``schedule`` section (a dict) with only the keys of its ``name``'s schedule.

    Recipes written before each schedule had its own keys hold every schedule's keys (a ``cosine`` recipe
    with ``gamma: 0.1, step_epochs: 30.0, decay_shape: 1-sqrt``). A key of another schedule that holds its
    default is dropped; with another value it is refused (``ValueError``, one line naming the key, the
    chosen schedule and the schedules that take it), unless ``stored``: a run's saved recipe, which trained
    without it. Keys no schedule has are left for the schema to refuse; anything but a dict is returned as is.

    >>> settle_schedule({"name": "cosine", "min_lr": 0.01, "gamma": 0.1, "decay_shape": "1-sqrt"})
    {'name': 'cosine', 'min_lr': 0.01}
    >>> settle_schedule({"name": "cosine", "gamma": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: schedule.gamma=0.5 does not apply to schedule.name=cosine; gamma is a key of step, multistep, plateau
    """
    if not isinstance(section, dict):
        return section
    name = section.get("name", DEFAULT)
    by_name = sections()
    own = by_name.get(name) if isinstance(name, str) else None
    if own is None:  # not a schedule: the schema says which names are
        return section
    out = {"name": name}
    for key, value in section.items():
        takers = [n for n, s in by_name.items() if key in s.model_fields and s is not own]
        if key in own.model_fields or not takers:  # its own key, or no schedule's (refused as unknown)
            out[key] = value
        elif not stored and not _is_default(key, value, [by_name[n] for n in takers]):
            raise ValueError(f"schedule.{key}={value!r} does not apply to schedule.name={name}; {key} is a key of "
                             f"{', '.join(takers)}")
    return out
