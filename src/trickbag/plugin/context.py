"""The trick context: the few facts a trick may read while a run is built, and the few things it may change.

A trick's plug-in sees this object at its two build-time seams (``Plugin.configure`` and
``Plugin.after_optimizer``) and nothing else of the run: no recipe, no trainer, no run state. The same
context is made by the recipe build (:func:`trickbag.train.build.build`), by a hand-built
:class:`~trickbag.train.trainer.Trainer` and by the adapters that run tricks in other trainers, and
:func:`trickbag.plugin.assemble.assemble` sets the tricks up on it in one way for all of them.

Facts (read only; setting one is an ``AttributeError``)::

    seed               the run's seed (tricks derive their own generators from it with ``rank``)
    epochs             epochs the run trains
    updates_per_epoch  optimizer updates in one epoch
    rank               this process among those that train together (0 alone)
    num_outputs        the model's outputs: classes, labels or regression targets
    train_set          the training set (a trick may extend its transforms); one sample's shape:
                       :func:`sample_shape`
    class_counts       training samples per class where the data source knows them, else None
    train_eval_loader  ``train_eval_loader()``: the training set in a fixed order without augmentation
    loaded_weights     names of the parameters loaded from pretrained weights (None: none were given)
    load_model         ``load_model(spec)``: a trained network from a run checkpoint or ``package.module:function``

Changeable (before the optimizer exists, in ``configure``)::

    model              the network (a trick may wrap or change it in place); it lives on the run's device
                       (:func:`trickbag.nn.device_of`)
    param_groups       the optimizer's parameter groups (dicts with ``params`` and optional options)
    loss_fn            ``loss_fn(output, target) -> loss``
    clip               the clipping rule the trainer applies once per update (a max norm, a function, None)
    make_optimizer     ``make_optimizer(param_groups) -> optimizer`` (a ``functools.partial`` of the optimizer
                       class and its options for the recipe's and a hand-built Trainer's optimizer)
    sample_weights     how often the training loader draws each training sample: None (each once per epoch,
                       shuffled) or a float tensor, one weight per sample of ``train_set``: each epoch then
                       draws as many samples, with replacement, in proportion to them. Only a recipe's loader
                       takes it; with a trainer's own DataLoader, a trick that sets it is refused in one line

That is all, on purpose (sixteen names). ``Plugin.after_optimizer`` receives, instead of the context, what
exists once the optimizer is built (:class:`Built`: the model as the run steps it, the optimizer, the schedule).
What a trick needs beyond them comes another way:

* what it did, for the user: a log record on the ``trickbag.tricks`` logger (:data:`log`); the run prints the
  records made while it is set up, as its own notes;
* the number of processes: a rule on it is a check (``Trick.checks``), made before anything is built;
* the optimizer and the schedule at run time: the run state's (``state.optimizer``, ``state.scheduler``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

__all__ = ["TrickContext", "Built", "sample_shape", "optimizer_defaults", "log"]

#: where tricks say what they did (``log.info(...)``): the run collects the records made while it is set up
log = logging.getLogger("trickbag.tricks")

#: the facts: set when the context is made, read only afterwards
FACTS = ("seed", "epochs", "updates_per_epoch", "rank", "num_outputs", "train_set", "class_counts",
         "train_eval_loader", "loaded_weights", "load_model")


class TrainingSet(Protocol):
    """The training set as tricks see it: samples by index (a torch ``Dataset`` and most others)."""

    def __getitem__(self, index: int) -> Any: ...


def sample_shape(dataset: TrainingSet | None) -> tuple[int, ...]:
    """The shape of one training sample's input (``[C, H, W]`` for images): ``dataset[0]``'s input, read with the
    random state put back afterwards (a random transform draws numbers; the run must not see it).

    >>> import torch
    >>> sample_shape(torch.utils.data.TensorDataset(torch.zeros(4, 3, 8, 8), torch.zeros(4)))
    (3, 8, 8)
    """
    from trickbag import runtime
    from trickbag.errors import RecipeError

    if dataset is None:
        raise RecipeError("the tricks need the shape of a training sample: pass a train_loader with a .dataset "
                          "(a torch DataLoader)")
    rng = runtime.get_rng_state()
    try:
        sample = dataset[0]
    except (TypeError, NotImplementedError, KeyError):
        raise RecipeError(f"the tricks need the shape of a training sample; the training set "
                          f"({type(dataset).__name__}) cannot be indexed with [0]") from None
    finally:
        runtime.set_rng_state(rng)
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


def _no_loader() -> Iterable[Any]:
    from trickbag.errors import RecipeError

    raise RecipeError("this trainer gives the tricks no loader over the training set")


@dataclasses.dataclass(kw_only=True, eq=False)
class TrickContext:
    """What recipe tricks may read and change while a run is built (see the module's docstring for each name)."""

    seed: int
    epochs: int
    updates_per_epoch: int
    rank: int = 0
    num_outputs: int
    train_set: TrainingSet | None
    class_counts: tuple[int, ...] | None = None
    train_eval_loader: Callable[[], Iterable[Any]] = _no_loader
    loaded_weights: frozenset[str] | None = None
    load_model: Callable[[str], torch.nn.Module]

    model: torch.nn.Module
    param_groups: list[dict[str, Any]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    clip: float | Callable[[list[torch.Tensor]], Any] | None = None
    make_optimizer: Callable[[list[dict[str, Any]]], torch.optim.Optimizer]
    sample_weights: torch.Tensor | None = None

    _sealed: bool = dataclasses.field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self._sealed = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name in FACTS and getattr(self, "_sealed", False):
            raise AttributeError(f"the trick context's {name!r} is a fact of the run; tricks read it, never set it")
        object.__setattr__(self, name, value)


@dataclasses.dataclass(frozen=True, eq=False)
class Built:
    """What ``Plugin.after_optimizer`` receives: the model as the run steps it (wrapped for DDP or sharded for
    FSDP by then), the optimizer the run steps and its schedule (None: none). Read only."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any = None


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
