"""What every optimizer module is made of: its :class:`Optimizer` entries (``OPTIMIZERS = (Optimizer(...), ...)``).

Nothing here imports torch: the recipe reads the optimizer names (``optim.name``) before anything heavy is
loaded; an entry's ``spec`` and ``route`` import torch (or the optional package) when they are called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["Optimizer", "Factory", "Route", "fused"]

#: param groups -> a torch optimizer
Factory = Callable[[list[dict[str, Any]]], Any]
#: ``(optim section, model, number of outputs, keyword arguments, notes) -> Factory``
Route = Callable[[Any, Any, int, dict[str, Any], list[str]], Factory]


@dataclasses.dataclass(frozen=True)
class Optimizer:
    """One optimizer: the registry entry (one per ``optim.name``) its module lists in ``OPTIMIZERS``.

    Args:
        name: the ``optim.name`` that chooses it.
        spec: ``optim section -> (optimizer class, keyword arguments)``; the class is called as
            ``cls(param_groups, **kwargs)`` (SAM calls ``SAM(param_groups, cls, **kwargs)``). Imports torch
            or its package inside.
        keys: the ``optim.*`` keys ``spec`` reads besides ``name`` (the docs say them).
        route: for an optimizer whose construction depends on the model (Muon: which matrices it takes):
            ``(optim section, model, number of outputs, kwargs, notes) -> param groups -> optimizer``; it may
            append a line to ``notes``. ``None``: ``cls(param_groups, **kwargs)``.
        schedule_free: it evaluates at other weights than it steps (an average of its iterates): it needs
            ``schedule.name=none``, takes its warm-up as the keyword ``warmup_steps`` (from
            ``schedule.warmup_epochs``), and the trainer calls its ``train()`` / ``eval()``.
        no_fsdp: why ``dist.strategy=fsdp`` refuses it (the middle of the error line); ``None``: it runs on shards.
        no_sam: why ``tricks.sam`` refuses it; ``None``: SAM wraps it.
        no_swa: why ``tricks.swa`` refuses it; ``None``: SWA averages it.
        no_lookahead: why ``optim.lookahead_k`` refuses it; ``None``: Lookahead wraps it.
        options: the recipe keys only this optimizer takes, as a :class:`~trickbag.config.Section` subclass
            (each field with its default, bound and ``#`` help comment, named ``<optimizer>_<key>``); its fields
            join the recipe's ``optim`` section after the shared keys (list them in ``keys`` too). ``None``: it
            reads the shared keys only.
    """

    name: str
    spec: Callable[[Any], tuple[type, dict[str, Any]]]
    keys: tuple[str, ...] = ()
    route: Route | None = None
    schedule_free: bool = False
    no_fsdp: str | None = None
    no_sam: str | None = None
    no_swa: str | None = None
    no_lookahead: str | None = None
    options: type | None = None

    def factory(self, section: Any) -> Factory:
        """``param groups -> optimizer`` for an optimizer without a ``route``."""
        cls, kwargs = self.spec(section)
        return lambda groups: cls(groups, **kwargs)


def fused(section: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with ``fused=True`` added when ``optim.fused`` is on (torch's fused kernel: Adam, AdamW, SGD); left as
    they are otherwise, so a recipe without it builds the optimizer it always did (torch's own default kernel).
    An entry that calls this lists ``"fused"`` in its ``keys``; the recipe refuses ``optim.fused`` for the others."""
    return {**kwargs, "fused": True} if section.fused else kwargs
