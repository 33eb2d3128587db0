"""The trick context: the few facts a trick may read while a run is built, and the few things it may change.

A trick's plug-in sees this object at its two build-time seams (``Plugin.configure`` and
``Plugin.after_optimizer``) and nothing else of the run: no recipe, no trainer, no run state. The same
context is made by the recipe build (:func:`trickbag.train.build.build`), by a hand-built
:class:`~trickbag.train.trainer.Trainer` and by the adapters that run tricks in other trainers, and
:func:`trickbag.plugin.assemble.assemble` sets the tricks up on it in one way for all of them.

Facts (read only; setting one is an ``AttributeError``)::

    seed               the run's seed (tricks derive their own generators from it)
    epochs             epochs the run trains
    updates_per_epoch  optimizer updates in one epoch
    rank, world_size   this process and how many train together
    device             where the model and the batches live
    num_outputs        the model's outputs: classes, labels or regression targets
    data               the training data as tricks may use it (:class:`TrickData`)
    loaded_weights     names of the parameters loaded from pretrained weights (None: none were given)
    load_model         ``load_model(spec)``: a trained network from a run checkpoint or ``package.module:function``

Changeable (before the optimizer exists, in ``configure``)::

    model              the network (a trick may wrap or change it in place)
    param_groups       the optimizer's parameter groups (dicts with ``params`` and optional options)
    loss_fn            ``loss_fn(output, target) -> loss``
    clip               the clipping rule the trainer applies once per update (a max norm, a function, None)
    make_optimizer     ``make_optimizer(param_groups) -> optimizer`` (a ``functools.partial`` of the optimizer
                       class and its options for the recipe's and a hand-built Trainer's optimizer)

Built (in ``after_optimizer``): ``optimizer`` and ``scheduler``.  ``note(text)`` adds a line to what the run
prints at its start.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["TrickContext", "TrickData", "optimizer_defaults"]

#: the facts: set when the context is made, read only afterwards
FACTS = ("seed", "epochs", "updates_per_epoch", "rank", "world_size", "device", "num_outputs", "data",
         "loaded_weights", "load_model")


class TrickData:
    """The training data as tricks may use it: one sample's shape, the training set (whose transforms a trick may
    extend), its class counts where the data source knows them, and a loader over it without augmentation.

    ``input_shape`` is read lazily (a hand-built Trainer's loader is asked for a sample only when a trick needs
    the shape) and the random state is put back afterwards, so asking does not change the run.
    """

    def __init__(self, train: Any, *, input_shape: Sequence[int] | None = None,
                 class_counts: Callable[[], Sequence[int]] | None = None,
                 train_eval_loader: Callable[[], Iterable[Any]] | None = None) -> None:
        self.train = train
        self._counts = class_counts
        self._shape = tuple(input_shape) if input_shape is not None else None
        self._loader = train_eval_loader

    @property
    def class_counts(self) -> tuple[int, ...] | None:
        """Training samples per class, where the data source knows them (read when first asked); else None."""
        return tuple(self._counts()) if self._counts is not None else None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one training sample's input (``[C, H, W]`` for images)."""
        if self._shape is None:
            self._shape = _first_input_shape(self.train)
        return self._shape

    def train_eval_loader(self) -> Iterable[Any]:
        """The training set in a fixed order without augmentation, batched like evaluation (SWA's BatchNorm
        recalibration)."""
        if self._loader is None:
            from trickbag.errors import RecipeError

            raise RecipeError("this trainer gives the tricks no loader over the training set")
        return self._loader()


def _first_input_shape(dataset: Any) -> tuple[int, ...]:
    from trickbag import runtime
    from trickbag.errors import RecipeError

    if dataset is None:
        raise RecipeError("the tricks need the shape of a training sample: pass a train_loader with a .dataset "
                          "(a torch DataLoader)")
    rng = runtime.get_rng_state()
    try:
        sample = dataset[0]
    finally:
        runtime.set_rng_state(rng)  # a random transform drew numbers: the run must not see it
    x = _input_of(sample)
    if not hasattr(x, "shape"):
        raise RecipeError(f"the tricks need the shape of a training sample; the training set's first sample is a "
                          f"{type(sample).__name__} without a tensor input")
    return tuple(x.shape)


def _input_of(sample: Any) -> Any:
    """The input tensor of one sample: ``(x, y, ...)`` or a dict with an input key."""
    if isinstance(sample, dict):
        for key in ("x", "input", "inputs", "image", "pixel_values", "input_ids"):
            if key in sample:
                return sample[key]
        return next(iter(sample.values()), None)
    if isinstance(sample, (tuple, list)):
        return sample[0] if sample else None
    return sample


@dataclasses.dataclass(kw_only=True, eq=False)
class TrickContext:
    """What recipe tricks may read and change while a run is built (see the module's docstring for each name)."""

    seed: int
    epochs: int
    updates_per_epoch: int
    rank: int = 0
    world_size: int = 1
    device: torch.device
    num_outputs: int
    data: TrickData
    loaded_weights: frozenset[str] | None = None
    load_model: Callable[[str], torch.nn.Module]

    model: torch.nn.Module
    param_groups: list[dict[str, Any]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    clip: float | Callable[[list[torch.Tensor]], Any] | None = None
    make_optimizer: Callable[[list[dict[str, Any]]], torch.optim.Optimizer]

    optimizer: torch.optim.Optimizer | None = None
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None

    #: where :meth:`note` writes (the caller's list: the run prints it); not a name tricks read
    notes: dataclasses.InitVar[list[str] | None] = None
    _notes: list[str] = dataclasses.field(default_factory=list, init=False, repr=False)
    _sealed: bool = dataclasses.field(default=False, init=False, repr=False)

    def __post_init__(self, notes: list[str] | None) -> None:
        if notes is not None:
            self._notes = notes
        self._sealed = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name in FACTS and getattr(self, "_sealed", False):
            raise AttributeError(f"the trick context's {name!r} is a fact of the run; tricks read it, never set it")
        object.__setattr__(self, name, value)

    def note(self, text: str) -> None:
        """Add one line to what the run prints when it starts (what a trick did, and why)."""
        self._notes.append(text)


def optimizer_defaults(make_optimizer: Any) -> dict[str, Any]:
    """The options ``make_optimizer`` passes to its optimizer (``lr``, ``weight_decay``, ...), read from a
    ``functools.partial`` (followed through ``base=`` for wrappers); ``{}`` when they cannot be read.

    >>> import torch
    >>> optimizer_defaults(functools.partial(torch.optim.SGD, lr=0.1, weight_decay=1e-4))
    {'lr': 0.1, 'weight_decay': 0.0001}
    """
    found: dict[str, Any] = {}
    while isinstance(make_optimizer, functools.partial):
        found = {**make_optimizer.keywords, **found}
        make_optimizer = make_optimizer.keywords.get("base")
    found.pop("base", None)
    return found


del TrickContext.notes  # type: ignore[attr-defined]  # an init-only argument: not a name a trick reaches (its default stays in __init__)
