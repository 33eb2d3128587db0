"""Modules that moved, answering at their former import paths for one release with a ``DeprecationWarning``.

``import trickbag.train.plugin`` (and every submodule under a moved package, e.g.
``trickbag.train.tricks.ema``) gives the module at its new path, the same object, after a warning
naming it. :func:`install` puts the finder first on ``sys.meta_path``; ``import trickbag`` calls it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install", "new_name"]

#: former module path -> where it lives now (a former package's submodules follow it)
MOVED = {
    "trickbag.train.plugin": "trickbag.plugin.interface",
    "trickbag.train.events": "trickbag.plugin.events",
    "trickbag.train.state": "trickbag.plugin.state",
    "trickbag.train.tricks": "trickbag.tricks",
    "trickbag.train.checkpointing": "trickbag.train.plugins.checkpoints",
    "trickbag.train.loggers": "trickbag.train.plugins.loggers",
    "trickbag.train.progress": "trickbag.train.plugins.progress",
    "trickbag.train.plots": "trickbag.train.plugins.plots",
    "trickbag.train.early_stopping": "trickbag.train.plugins.early_stopping",
    "trickbag.train.signals": "trickbag.train.plugins.signals",
    "trickbag.train.runfolder": "trickbag.train.plugins.run_folder",
    "trickbag.train.checkpoint": "trickbag.train.checkpoint_files",
    "trickbag.nn.checkpointing": "trickbag.nn.activation_checkpointing",
    "trickbag.runs.directory": "trickbag.runs.naming",
    "trickbag.optim.schedulers": "trickbag.optim.lr_scheduler",
}


def new_name(old: str) -> str | None:
    """Where the module ``old`` lives now, or None when it did not move."""
    for before, after in MOVED.items():
        if old == before or old.startswith(before + "."):
            return after + old[len(before):]
    return None


class _Forward(importlib.abc.Loader):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{self.old} moved to {self.new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[self.old] = module  # the same module object under both names


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Forward(fullname, new))


def install() -> None:
    """Answer the former paths (idempotent)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
