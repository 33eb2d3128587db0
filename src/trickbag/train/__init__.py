"""The trainer: the loop, its events and state, the Task seam, checkpoints, built-in plug-ins and trick modules.

Loaded lazily (``import trickbag.train`` imports no torch), so the recipe schema can read the trick
modules without the trainer.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Trainer", "Plugin", "Event", "State", "StopReason", "EarlyStopping", "Task", "Classification",
           "Multilabel", "Regression"]

_EXPORTS = {
    "Trainer": "trickbag.train.trainer",
    "Plugin": "trickbag.train.plugin",
    "Event": "trickbag.train.events",
    "State": "trickbag.train.state",
    "StopReason": "trickbag.train.state",
    "EarlyStopping": "trickbag.train.early_stopping",
    "Task": "trickbag.train.tasks",
    "Classification": "trickbag.train.tasks",
    "Multilabel": "trickbag.train.tasks",
    "Regression": "trickbag.train.tasks",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'trickbag.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
