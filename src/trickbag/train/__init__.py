"""The trainer: the loop, its events and state, the Task seam, checkpoints, built-in plug-ins and trick modules.

Loaded lazily (``import trickbag.train`` imports no torch), so the recipe schema can read the trick
modules without the trainer.
"""

from __future__ import annotations

from trickbag._optional import lazy_exports

__all__ = ["Trainer", "Plugin", "Event", "State", "StopReason", "EarlyStopping", "Task", "Classification",
           "Multilabel", "Regression"]

_EXPORTS = {
    "Trainer": "trickbag.train.trainer",
    "Plugin": "trickbag.plugin.interface",
    "Event": "trickbag.plugin.events",
    "State": "trickbag.plugin.state",
    "StopReason": "trickbag.plugin.state",
    "EarlyStopping": "trickbag.train.plugins.early_stopping",
    "Task": "trickbag.train.tasks",
    "Classification": "trickbag.train.tasks",
    "Multilabel": "trickbag.train.tasks",
    "Regression": "trickbag.train.tasks",
}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
