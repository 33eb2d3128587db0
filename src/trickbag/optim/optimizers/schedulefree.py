"""``schedulefree_adamw`` and ``schedulefree_sgd``: the ``schedulefree`` package's optimizers (Defazio et al. 2024,
the ``schedulefree`` extra). They evaluate at an average of their iterates, so they take no decaying schedule,
no SAM, no SWA and no Lookahead; their warm-up is their own ``warmup_steps`` (from ``schedule.warmup_epochs``)."""

from __future__ import annotations

from typing import Any

from trickbag.optim.optimizers.base import Optimizer

NO_SAM = ("SAM steps the optimizer's own weights, a schedule-free optimizer steps an interpolation of its "
          "iterates")
NO_SWA = ("a schedule-free optimizer already evaluates an average of its iterates, and SWA's own LR schedule "
          "would fight it")
NO_LOOKAHEAD = "a schedule-free optimizer already averages its iterates"


def _package(name: str) -> Any:
    from trickbag._optional import require

    return require("schedulefree", extra="schedulefree", feature=f"optim.name={name}")


def _adamw(o: Any) -> tuple[type, dict[str, Any]]:
    return _package(o.name).AdamWScheduleFree, dict(lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay)


def _sgd(o: Any) -> tuple[type, dict[str, Any]]:
    return _package(o.name).SGDScheduleFree, dict(lr=o.lr, momentum=o.momentum, weight_decay=o.weight_decay)


def _entry(name: str, spec: Any, keys: tuple[str, ...]) -> Optimizer:
    return Optimizer(name=name, spec=spec, keys=keys, schedule_free=True, no_sam=NO_SAM, no_swa=NO_SWA,
                     no_lookahead=NO_LOOKAHEAD)


OPTIMIZERS = (
    _entry("schedulefree_adamw", _adamw, ("lr", "betas", "eps", "weight_decay")),
    _entry("schedulefree_sgd", _sgd, ("lr", "momentum", "weight_decay")),
)
