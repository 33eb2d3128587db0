"""A hand-built :class:`~trickbag.train.trainer.Trainer`'s tricks and plug-ins, set up as a recipe build sets up
its own: the ``tricks`` section validated and checked as a recipe's, a :class:`TrickContext` made from the model,
optimizer and loaders the caller gave (no recipe), and :func:`~trickbag.plugin.assemble.assemble`."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch

from trickbag.config.schema import DataConfig
from trickbag.data.sources import BatchGather
from trickbag.errors import RecipeError
from trickbag.nn import device_of
from trickbag.optim import optimizers
from trickbag.plugin.assemble import LegacyContext, assemble
from trickbag.plugin.context import TrickContext, sample_shape
from trickbag.plugin.interface import Plugin
from trickbag.recipe import recipe_from_dict
from trickbag.runtime import DistInfo
from trickbag.train.parts import load_model, make_loader
from trickbag.tricks import TRICKS, build_sections, check_interactions

if TYPE_CHECKING:
    from trickbag.plugin.state import State

__all__ = ["set_up_plugins", "trainer_facts", "bare_context", "tricks_section"]


def tricks_section(tricks: Any) -> Any:
    """The ``tricks`` argument validated as a recipe's ``tricks`` section (a trick named is switched on)."""
    if isinstance(tricks, dict):
        section = {k: ({"enabled": True, **v} if isinstance(v, dict) else v) for k, v in tricks.items()}
        parsed = recipe_from_dict({"tricks": section}).tricks  # the recipe's own validation and one-line errors
    else:  # a TricksConfig, e.g. a recipe's
        parsed = tricks
    for name, trick in TRICKS.items():
        if trick.recipe_only and getattr(parsed, name).enabled:
            raise RecipeError(f"tricks.{name} cannot be set up by a hand-built Trainer: {trick.recipe_only}")
    return parsed


@dataclasses.dataclass(frozen=True)
class TrainerFacts:
    """What the interaction checks (``Trick.checks``) read, taken from a Trainer's arguments: the same names as
    in a recipe, with the values this trainer really has (and nothing it does not know)."""

    tricks: Any
    task: Any
    train: Any
    optim: Any
    dist: Any
    name: str = "trainer"
    data: Any = None
    model: Any = None
    schedule: Any = None


def trainer_facts(tricks: Any, *, task: str, epochs: int, clip: Any, monitor: str, optimizer: torch.optim.Optimizer,
                  world_size: int, sharded: bool = False) -> TrainerFacts:
    """The facts a Trainer's tricks are checked against (see :class:`TrainerFacts`)."""
    return TrainerFacts(
        tricks=tricks, task=SimpleNamespace(type=task),
        train=SimpleNamespace(epochs=epochs, clip=clip if isinstance(clip, (int, float)) else None, monitor=monitor),
        optim=SimpleNamespace(name=optimizers.name_of(optimizer), lookahead_k=0),
        dist=SimpleNamespace(nproc=world_size, strategy="fsdp" if sharded else "ddp"),
    )


def _training_set(loader: Any) -> Any:
    ds = getattr(loader, "dataset", None)
    return ds.dataset if isinstance(ds, BatchGather) else ds


def _train_eval_loader(train: Any, train_loader: Any, eval_batch_size: int | None, seed: int, dist: DistInfo,
                       device: torch.device) -> Any:
    """A loader over the training set in order, batched like the validation loader (made when a trick asks)."""
    settings = SimpleNamespace(
        data=DataConfig(batch_size=getattr(train_loader, "batch_size", None) or 1, eval_batch_size=eval_batch_size,
                        pin_memory=False),
        train=SimpleNamespace(seed=seed))

    def loader() -> Any:
        if train is None:
            raise RecipeError("the tricks need the training set: pass a train_loader with a .dataset")
        return make_loader(train, settings, train=False, dist=dist, device=device)  # type: ignore[arg-type]

    return loader


def _num_outputs(model: torch.nn.Module, task: Any, train: Any, device: torch.device) -> int:
    n = getattr(task, "num_classes", None) or getattr(task, "num_labels", None) or getattr(task, "num_targets", None)
    if n:
        return int(n)
    # a classification task that infers its classes: the model's output on a sample tells
    was_training = model.training
    try:
        with torch.inference_mode():
            out = model.eval()(torch.zeros((1, *sample_shape(train)), device=device))
    except Exception:  # noqa: BLE001 (a probe: a forward that takes other inputs (token ids, dicts) leaves it unknown)
        return 0  # unknown: the tricks that need it (mix) say so in one line
    finally:
        model.train(was_training)
    if isinstance(out, dict) and "logits" in out:
        out = out["logits"]
    return int(out.shape[-1]) if isinstance(out, torch.Tensor) and out.dim() >= 1 else 0


def remake(optimizer: torch.optim.Optimizer) -> functools.partial:
    """How to build ``optimizer`` again on other parameter groups: its class and the options its constructor takes
    (``defaults`` may hold entries the constructor does not accept, e.g. AdamW's ``decoupled_weight_decay``)."""
    cls = type(optimizer)
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return functools.partial(cls, **{k: v for k, v in optimizer.defaults.items() if takes_any or k in params})


def bare_context(model: torch.nn.Module, optimizer: torch.optim.Optimizer, train_loader: Any, *, epochs: int,
                 loss_fn: Any, seed: int, accumulate: int = 1, task: Any = None, clip: Any = None,
                 eval_batch_size: int | None = None, device: torch.device | None = None,
                 dist: DistInfo | None = None) -> TrickContext:
    """A :class:`TrickContext` of a model, its optimizer and a training loader, as a hand-written loop, a
    hand-built Trainer or another framework's trainer has them (no recipe). ``task``: what gives the number of
    outputs (``num_classes``/``num_labels``/``num_targets``); without one the model's output on a sample tells."""
    dist = dist or DistInfo()
    device = device or device_of(model)
    train = _training_set(train_loader)
    try:
        updates = math.ceil(len(train_loader) / accumulate)
    except TypeError:  # an iterable without a length
        updates = 1
    return TrickContext(
        seed=seed, epochs=epochs, updates_per_epoch=updates, rank=dist.rank,
        num_outputs=_num_outputs(model, task, train, device), train_set=train,
        class_counts=None,  # only a recipe's data source knows them
        train_eval_loader=_train_eval_loader(train, train_loader, eval_batch_size, seed, dist, device),
        loaded_weights=frozenset(model.state_dict()),  # the caller's model holds the weights it was given
        load_model=load_model, model=model, param_groups=[dict(g) for g in optimizer.param_groups],
        loss_fn=loss_fn, clip=clip, make_optimizer=remake(optimizer),
    )


def _schedule(scheduler: Any, given: torch.optim.Optimizer) -> Any:
    def make(optimizer: torch.optim.Optimizer) -> Any:
        if callable(scheduler):
            return scheduler(optimizer)
        if scheduler is not None and optimizer is not given:
            raise RecipeError("the tricks build a new optimizer (param groups or a wrapper such as SAM), which the "
                              "scheduler you passed does not step; pass scheduler=lambda optimizer: <its scheduler>")
        return scheduler
    return make


def set_up_plugins(state: State, tricks: Any, plugins: list[Plugin], *, clip: Any, scheduler: Any,
                   seed: int | None, monitor: str, mode: str, loss_given: bool = False) -> tuple[list[Plugin], Any]:
    """A hand-built Trainer's set-up, the recipe build's own: the ``tricks`` section validated and checked as a
    recipe's (one-line :class:`RecipeError` s), its plug-ins built, then with the ``plugins`` that need set-up
    :func:`~trickbag.plugin.assemble.assemble` d. Updates ``state`` (model, optimizer, scheduler, loss); returns
    (plug-ins, clip)."""
    section = tricks_section(tricks or {})
    facts = trainer_facts(section, task=state.task.name, epochs=state.max_epochs, clip=clip, monitor=monitor,
                          optimizer=state.optimizer, world_size=state.dist.world_size)
    check_interactions(facts)
    built = build_sections(section)
    seed = torch.initial_seed() % 2**32 if seed is None else seed
    ctx = bare_context(state.model, state.optimizer, state.train_loader, epochs=state.max_epochs,
                       loss_fn=state.loss_fn, seed=seed, accumulate=state.accumulate, task=state.task, clip=clip,
                       eval_batch_size=getattr(state.val_loader, "batch_size", None), device=state.device,
                       dist=state.dist)
    former = SimpleNamespace(device=state.device, world_size=state.dist.world_size, task=state.task,
                             train_loader=state.train_loader, val_loader=state.val_loader, monitor=monitor)
    done = assemble(ctx, built, plugins, schedule=_schedule(scheduler, state.optimizer), keep=state.optimizer,
                    given_loss=loss_given, legacy=lambda t: LegacyContext(t, former))
    state.model, state.loss_fn = ctx.model, ctx.loss_fn
    state.optimizer, state.scheduler = done.optimizer, done.scheduler
    return built + list(plugins), ctx.clip
