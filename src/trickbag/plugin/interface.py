"""The plug-in interface: two build-time seams, one no-op method per loop event, optional state. The build-time
seams see a :class:`~trickbag.plugin.context.TrickContext` (``configure``) and a
:class:`~trickbag.plugin.context.Built` (``after_optimizer``).

This module sits below the recipe and the trainer: it imports neither (a trick reads the recipe through
:class:`RecipeView`, which :class:`trickbag.recipe.Recipe` satisfies), so the trick modules, the recipe that
holds their sections and the trainer that runs them form no import circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from trickbag.plugin.events import Event

if TYPE_CHECKING:
    from trickbag.plugin.context import Built, TrickContext
    from trickbag.plugin.state import State

__all__ = ["Plugin", "RecipeView"]


class RecipeView(Protocol):
    """The recipe as a trick reads it: its sections (a :class:`trickbag.recipe.Recipe` is one; a hand-built
    Trainer's tricks see the recipe its arguments amount to)."""

    @property
    def name(self) -> str: ...
    @property
    def data(self) -> Any: ...
    @property
    def task(self) -> Any: ...
    @property
    def model(self) -> Any: ...
    @property
    def optim(self) -> Any: ...
    @property
    def schedule(self) -> Any: ...
    @property
    def train(self) -> Any: ...
    @property
    def tricks(self) -> Any: ...


class Plugin:
    """Base class of trainer plug-ins.

    Build-time seams, called once per plug-in: by :func:`trickbag.train.build.build` for the plug-ins a
    recipe makes, by :class:`~trickbag.train.trainer.Trainer` for its ``tricks=`` and for a plug-in in
    ``plugins=`` that overrides one of them and was not set up yet (:meth:`needs_setup`):

    * :meth:`configure` — before the optimizer exists: change the model, the loss, the param
      groups, the optimizer factory or the clipping rule on the build context;
    * :meth:`after_optimizer` — the optimizer and the schedule exist.

    Loop events: override any ``on_<event>(state)``; the trainer calls only the ones a plug-in
    overrides. A plug-in with state to resume overrides :meth:`state_dict` / :meth:`load_state_dict`;
    it is stored in checkpoints under :attr:`key` (default: :attr:`name`, else the class name).

    >>> class CountSteps(Plugin):
    ...     def __init__(self): self.n = 0
    ...     def on_step(self, state): self.n += 1
    ...     def state_dict(self): return {"n": self.n}
    ...     def load_state_dict(self, sd): self.n = sd["n"]
    >>> CountSteps().handles(Event.STEP), CountSteps().handles(Event.LOSS)
    (True, False)
    """

    #: checkpoint key (the trick name for recipe tricks)
    name: ClassVar[str] = ""

    @property
    def key(self) -> str:
        """Key of this plug-in's state inside a checkpoint."""
        return self.name or type(self).__name__

    #: True once :meth:`configure` and :meth:`after_optimizer` ran (the build marks it)
    set_up: bool = False

    def configure(self, ctx: TrickContext) -> None:
        """Build time, before the optimizer is built."""

    def after_optimizer(self, built: Built) -> None:
        """Build time, after the optimizer and the schedule are built: ``built.model`` (as the run steps it),
        ``built.optimizer``, ``built.scheduler``."""

    def needs_setup(self) -> bool:
        """Whether this plug-in has build-time set-up (:meth:`configure` / :meth:`after_optimizer`) still to run."""
        cls = type(self)
        return not self.set_up and (cls.configure is not Plugin.configure
                                    or cls.after_optimizer is not Plugin.after_optimizer)

    def on_fit_start(self, state: State) -> None: ...
    def on_epoch_start(self, state: State) -> None: ...
    def on_batch_start(self, state: State) -> None: ...
    def on_loss(self, state: State) -> None: ...
    def on_after_backward(self, state: State) -> None: ...
    def on_step(self, state: State) -> None: ...
    def on_eval_start(self, state: State) -> None: ...
    def on_eval_end(self, state: State) -> None: ...
    def on_epoch_end(self, state: State) -> None: ...
    def on_checkpoint(self, state: State) -> None: ...
    def on_fit_end(self, state: State) -> None: ...

    def state_dict(self) -> dict[str, Any] | None:
        """State to checkpoint, or ``None`` for a stateless plug-in."""
        return None

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def handles(self, event: Event) -> bool:
        """Whether this plug-in overrides the method for ``event``."""
        method = "on_" + event.value
        return getattr(type(self), method) is not getattr(Plugin, method)


def __getattr__(name: str) -> Any:
    if name == "BuildContext":  # the former build context: plug-ins type their configure(ctx) with it
        import warnings

        from trickbag.plugin.context import TrickContext

        warnings.warn("trickbag.plugin.interface.BuildContext is deprecated and goes in the next release; plug-ins "
                      "receive trickbag.plugin.context.TrickContext", DeprecationWarning, stacklevel=2)
        return TrickContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
