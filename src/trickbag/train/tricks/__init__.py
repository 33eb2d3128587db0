"""Recipe tricks: each entry of the recipe's ``tricks`` section becomes one or more trainer plug-ins.

A trick registers a factory with :func:`register_trick`::

    @register_trick("mixup", "Mixup: train on convex combinations of pairs of samples (Zhang et al. 2018)")
    def _mixup(cfg, recipe):          # cfg = recipe.tricks.mixup (a pydantic section with `enabled`)
        return [MixupPlugin(...)]

Plug-ins may also define ``configure(ctx)`` (called with the :class:`~trickbag.train.build.BuildContext`
before the optimizer is built: change the model, the loss, the param groups or the optimizer
factory) and ``after_optimizer(ctx)``. Interaction rules between tricks are checked in
:func:`check_interactions` before anything is built.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

from trickbag.config import Recipe
from trickbag.train.plugin import Plugin

__all__ = ["register_trick", "build_tricks", "describe_tricks", "TRICKS", "ORDER", "INTERACTION_CHECKS"]


@dataclasses.dataclass
class TrickInfo:
    name: str
    description: str
    factory: Callable[[Any, Recipe], list[Plugin]]


TRICKS: dict[str, TrickInfo] = {}

#: order in which enabled tricks' plug-ins run (events follow list order; *_END events reverse it)
ORDER: list[str] = []

#: functions check(recipe) raising ConflictError for combinations that are refused
INTERACTION_CHECKS: list[Callable[[Recipe], None]] = []

#: modules that register tricks (imported on first use)
_MODULES: list[str] = ["trickbag.train.tricks.batch_loss", "trickbag.train.tricks.optim_tricks",
                      "trickbag.train.tricks.model_tricks", "trickbag.train.tricks.eval_tricks",
                      "trickbag.train.tricks.weights", "trickbag.train.tricks.loggers"]


def register_trick(name: str, description: str) -> Callable:
    """Register ``factory(cfg, recipe) -> list[Plugin]`` for ``recipe.tricks.<name>``."""

    def deco(factory: Callable[[Any, Recipe], list[Plugin]]) -> Callable[[Any, Recipe], list[Plugin]]:
        TRICKS[name] = TrickInfo(name, description, factory)
        if name not in ORDER:
            ORDER.append(name)
        return factory

    return deco


def _load() -> None:
    for mod in _MODULES:
        importlib.import_module(mod)


def check_interactions(recipe: Recipe) -> None:
    """Raise :class:`~trickbag.errors.ConflictError` (one line: why, and what to do) for refused combinations."""
    _load()
    for check in INTERACTION_CHECKS:
        check(recipe)


def build_tricks(recipe: Recipe) -> list[Plugin]:
    """Plug-ins for the tricks enabled in ``recipe.tricks``, in :data:`ORDER`."""
    _load()
    check_interactions(recipe)
    plugins: list[Plugin] = []
    for name in ORDER:
        cfg = getattr(recipe.tricks, name, None)
        if cfg is not None and getattr(cfg, "enabled", False):
            plugins += TRICKS[name].factory(cfg, recipe)
    return plugins


def describe_tricks() -> str:
    """One block per trick: name, what it does, and its recipe keys with defaults."""
    _load()
    from trickbag.config import TricksConfig

    lines = []
    for name in ORDER:
        info = TRICKS[name]
        lines.append(f"{name:18s} {info.description}")
        field = TricksConfig.model_fields.get(name)
        model = field.annotation if field is not None else None
        if isinstance(model, type) and hasattr(model, "model_fields"):
            keys = []
            for k, f in model.model_fields.items():
                default = "required" if f.is_required() else f.get_default(call_default_factory=True)
                keys.append(f"tricks.{name}.{k}={default!r}" if k != "enabled" else f"tricks.{name}.enabled=true")
            lines.append(" " * 19 + "  ".join(keys))
    return "\n".join(lines) if lines else "no recipe tricks are registered"
