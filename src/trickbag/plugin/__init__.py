"""The plug-in interface: what a trick or any plug-in may see and change, and nothing of the trainer.

:class:`Plugin` (build-time seams and one method per loop event), :class:`Event`, the run's :class:`State`, the
:class:`TrickContext` tricks are set up on (and :class:`Built`, what exists once the optimizer does), and
:func:`assemble`, the one way tricks are set up (by the recipe build, a hand-built Trainer and the framework
adapters). Loaded lazily: ``import trickbag.plugin`` imports no torch, so the recipe schema can read the trick
modules without it.
"""

from __future__ import annotations

from trickbag._optional import lazy_exports

__all__ = ["Plugin", "RecipeView", "Event", "State", "StopReason", "Services", "TrickContext", "Built",
           "assemble", "Assembly", "LegacyContext"]

_EXPORTS = {
    "Plugin": "trickbag.plugin.interface",
    "RecipeView": "trickbag.plugin.interface",
    "Event": "trickbag.plugin.events",
    "State": "trickbag.plugin.state",
    "StopReason": "trickbag.plugin.state",
    "Services": "trickbag.plugin.state",
    "TrickContext": "trickbag.plugin.context",
    "Built": "trickbag.plugin.context",
    "assemble": "trickbag.plugin.assemble",
    "Assembly": "trickbag.plugin.assemble",
    "LegacyContext": "trickbag.plugin.assemble",
}

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
