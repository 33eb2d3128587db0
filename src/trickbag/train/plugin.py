"""The plug-in interface: two build-time seams, one no-op method per loop event, optional state; and the build
context those seams see (:class:`BuildContext`).

This module sits below the recipe and the trainer: it imports neither (a trick reads the recipe through
:class:`RecipeView`, which :class:`trickbag.recipe.Recipe` satisfies), so the trick modules, the recipe that
holds their sections and the trainer that runs them form no import circle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from trickbag.errors import RecipeError
from trickbag.train.events import Event

if TYPE_CHECKING:
    import torch

    from trickbag import runtime
    from trickbag.data.sources import DataSplits
    from trickbag.train.state import State
    from trickbag.train.tasks import Task

__all__ = ["Plugin", "BuildContext", "RecipeView"]


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

    def configure(self, ctx: BuildContext) -> None:
        """Build time, before the optimizer is built."""

    def after_optimizer(self, ctx: BuildContext) -> None:
        """Build time, after the optimizer and the schedule are built."""

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



def _default_optimizer() -> tuple[type, dict[str, Any]]:
    import torch  # not at import time: the recipe schema reads the trick modules without torch

    return torch.optim.SGD, {}


@dataclasses.dataclass(kw_only=True)
class BuildContext:
    """What recipe tricks may inspect and change while a run is being built (``Plugin.configure``)."""

    recipe: RecipeView
    data: DataSplits
    task: Task
    model: torch.nn.Module
    device: torch.device
    dist: runtime.DistInfo
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    #: who set ``loss_fn`` when it is not the task's own loss: ``""`` (nobody), ``"loss_fn"`` (the Trainer's caller)
    loss_owner: str = ""
    train_loader: Any
    val_loader: Any
    test_loader: Any
    steps_per_epoch: int
    total_steps: int
    #: outputs of the model: classes, labels or regression targets
    num_outputs: int
    #: param groups for the optimizer (dicts with "params" and optional "lr", "weight_decay", ...)
    param_groups: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: the recipe's optimizer class and keyword arguments (for wrappers such as SAM)
    optimizer_spec: tuple[type, dict[str, Any]] = dataclasses.field(default_factory=lambda: _default_optimizer())
    #: builds the optimizer from param groups; a trick may wrap it (SAM)
    optimizer_factory: Callable[[list[dict[str, Any]]], torch.optim.Optimizer] | None = None
    #: the clipping rule the trainer applies once per update (a max norm, a function, or None)
    clip: Any = None
    optimizer: torch.optim.Optimizer | None = None
    scheduler: Any = None
    plugins: list[Plugin] = dataclasses.field(default_factory=list)
    #: the recipe's ``train.plugins``, built; the run path adds them after every other plug-in
    user_plugins: list[Plugin] = dataclasses.field(default_factory=list)
    #: the metric best.pt and early stopping follow, and whether larger is better
    monitor: str = "val/acc"
    mode: str = "max"
    #: what loading ``model.weights`` did (None without weights): loaded, missing, unexpected, mismatched
    weights_report: Any = None
    #: extra entries stored in every checkpoint
    checkpoint_extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    #: ``train.threads: auto``'s per-epoch check (None for a fixed count), and what was set
    threads_check: Any = None
    threads: str = ""

    def threads_report(self) -> str:
        """The thread count of the run, e.g. ``1`` or ``auto -> 1 (2 cores, 1.0 busy with other processes)``."""
        return self.threads_check.report() if self.threads_check is not None else self.threads

    #: makes a loader like the run's own (set by the build; see :meth:`make_loader`)
    loader_maker: Callable[..., Any] | None = None
    #: loads a trained network from a run checkpoint or ``package.module:function`` (see :meth:`load_model`)
    model_loader: Callable[[str], torch.nn.Module] | None = None

    def make_loader(self, dataset: Any, *, train: bool) -> Any:
        """A loader over ``dataset`` made like the run's own (seeded sampler, rank shard, workers)."""
        if self.loader_maker is None:
            raise RecipeError("this build makes no data loaders for tricks")
        return self.loader_maker(dataset, train=train)

    def load_model(self, spec: str) -> torch.nn.Module:
        """A trained network named by a run checkpoint path or ``package.module:function`` (a teacher)."""
        if self.model_loader is None:
            raise RecipeError("this build loads no trained networks for tricks")
        return self.model_loader(spec)
