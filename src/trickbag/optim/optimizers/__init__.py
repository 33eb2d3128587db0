"""The optimizers a recipe can name (``optim.name``), one module per family, and their registry.

An optimizer module declares, for each name it serves, one :class:`~trickbag.optim.optimizers.base.Optimizer`
(in ``OPTIMIZERS = (...)`` at its end): its builder (``spec``: the recipe's ``optim`` section -> optimizer class
and keyword arguments, torch imported inside; ``route`` when the model decides the construction), the
``optim.*`` keys it reads, whether it is schedule-free, why FSDP, SAM, SWA or Lookahead refuse it, and the recipe
keys only it takes (``options``). Adding an optimizer is that module and its name in the import line and in
:data:`MODULES` below (the order names are listed in). ``optim.name``'s allowed values and the ``optim`` section
of the recipe, ``trickbag recipes --keys``, docs/recipes.md, the optimizer a run builds, the FSDP refusal and the
SAM / SWA / Lookahead refusals are all read from here, when they are used; nothing else compares optimizer names.
Nothing here imports torch.
"""

from __future__ import annotations

import typing
from typing import Any

from trickbag.optim.optimizers import adam, lamb, lion, muon, rmsprop, schedulefree, sgd
from trickbag.optim.optimizers.base import Optimizer

__all__ = ["MODULES", "DEFAULT", "Optimizer", "optimizers", "names", "get", "name_type", "option_sections",
           "refusal", "name_of"]

#: the optimizer modules, in the order their names are listed
MODULES: tuple[Any, ...] = (sgd, adam, rmsprop, muon, schedulefree, lion, lamb)
#: ``optim.name`` of a recipe that names none
DEFAULT = "sgd"


def optimizers() -> dict[str, Optimizer]:
    """``optim.name`` -> its entry, every name of every module in :data:`MODULES` (read when called)."""
    out: dict[str, Optimizer] = {}
    for module in MODULES:
        for entry in module.OPTIMIZERS:
            if entry.name in out:
                raise ValueError(f"optimizer name {entry.name!r} is declared twice (in {module.__name__})")
            out[entry.name] = entry
    return out


def names() -> tuple[str, ...]:
    """The names ``optim.name`` takes, in the order of :data:`MODULES`."""
    return tuple(optimizers())


def get(name: str) -> Optimizer:
    """The entry of ``optim.name`` (``KeyError`` for a name no module declares; the recipe refuses those)."""
    return optimizers()[name]


def refusal(name: str, what: str) -> str:
    """Why the optimizer ``name`` refuses ``what`` (``"no_sam"``, ``"no_swa"``, ``"no_fsdp"``, ``"no_lookahead"``),
    ``""`` when it does not; an optimizer no module declares (a hand-built Trainer's own) refuses nothing here."""
    entry = optimizers().get(name)
    return str(getattr(entry, what) or "") if entry is not None else ""


def name_of(optimizer: Any) -> str:
    """The ``optim.name`` whose class ``optimizer`` is an instance of (a hand-built Trainer's optimizer), else its
    class name. Entries whose optional package is missing are passed over."""
    from trickbag.config import OptimConfig

    for name, entry in optimizers().items():
        try:
            cls, _ = entry.spec(OptimConfig(name=name))
        except Exception:  # noqa: BLE001 (an optional package that is not installed: not this one)
            continue
        if type(optimizer) is cls:
            return name
    return type(optimizer).__name__


def name_type() -> Any:
    """``Literal[<every name>]``: the type of the recipe's ``optim.name``."""
    return typing.Literal.__getitem__(names())


def option_sections() -> tuple[type, ...]:
    """The ``options`` sections of the entries (each once, in the order of :data:`MODULES`): the recipe's ``optim``
    section is the shared keys (:class:`~trickbag.config.OptimConfig`) and these. ``ValueError`` when two of them,
    or one and the shared keys, define the same key."""
    from trickbag.config import OptimConfig

    sections = tuple(dict.fromkeys(e.options for e in optimizers().values() if e.options is not None))
    seen = {key: "the shared optim keys" for key in OptimConfig.model_fields}
    for section in sections:
        for key in section.model_fields:  # type: ignore[attr-defined]
            if key in seen:
                raise ValueError(f"optim.{key} of {section.__name__} is also defined by {seen[key]}")
            seen[key] = section.__name__
    return sections
