"""The plug-in interface: one no-op method per loop event, plus optional state for checkpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from trickbag.train.events import Event

if TYPE_CHECKING:
    from trickbag.train.state import State

__all__ = ["Plugin", "PLUGINS", "register_plugin"]


class Plugin:
    """Base class of trainer plug-ins.

    Override any ``on_<event>(state)`` method; the trainer calls only the ones a plug-in overrides.
    A plug-in with state to resume overrides :meth:`state_dict` / :meth:`load_state_dict`; it is
    stored in checkpoints under :attr:`key` (default: the class name).

    >>> class CountSteps(Plugin):
    ...     def __init__(self): self.n = 0
    ...     def on_step(self, state): self.n += 1
    ...     def state_dict(self): return {"n": self.n}
    ...     def load_state_dict(self, sd): self.n = sd["n"]
    """

    #: recipe key / registry name (set by :func:`register_plugin`)
    name: ClassVar[str] = ""

    @property
    def key(self) -> str:
        """Key of this plug-in's state inside a checkpoint."""
        return self.name or type(self).__name__

    def on_fit_start(self, state: "State") -> None: ...
    def on_epoch_start(self, state: "State") -> None: ...
    def on_batch_start(self, state: "State") -> None: ...
    def on_loss(self, state: "State") -> None: ...
    def on_after_backward(self, state: "State") -> None: ...
    def on_step(self, state: "State") -> None: ...
    def on_epoch_end(self, state: "State") -> None: ...
    def on_eval_start(self, state: "State") -> None: ...
    def on_eval_end(self, state: "State") -> None: ...
    def on_fit_end(self, state: "State") -> None: ...

    def state_dict(self) -> dict[str, Any] | None:
        """State to checkpoint, or ``None`` for a stateless plug-in."""
        return None

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def handles(self, event: Event) -> bool:
        """Whether this plug-in overrides the method for ``event``."""
        method = "on_" + event.value
        return getattr(type(self), method) is not getattr(Plugin, method)


#: registry of recipe-switchable plug-ins: name -> class
PLUGINS: dict[str, type[Plugin]] = {}


def register_plugin(name: str):
    """Class decorator that registers a plug-in under a recipe name."""

    def deco(cls: type[Plugin]) -> type[Plugin]:
        if name in PLUGINS and PLUGINS[name] is not cls:
            raise ValueError(f"plug-in name {name!r} is already registered by {PLUGINS[name].__name__}")
        cls.name = name
        PLUGINS[name] = cls
        return cls

    return deco
