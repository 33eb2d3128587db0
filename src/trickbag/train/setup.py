"""A hand-built :class:`~trickbag.train.trainer.Trainer`'s tricks and plug-ins, set up as a recipe build sets up
its own: the ``tricks`` section validated and checked as a recipe's, its plug-ins built against the model,
optimizer and loaders the caller gave."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from trickbag import runtime
from trickbag.data.sources import BatchGather
from trickbag.errors import RecipeError
from trickbag.recipe import Recipe, recipe_from_dict
from trickbag.train.parts import load_model, make_loader
from trickbag.train.plugin import BuildContext, Plugin
from trickbag.train.tricks import TRICKS, build_tricks

if TYPE_CHECKING:
    from trickbag.train.state import State

__all__ = ["set_up_plugins"]


class _LoaderData:
    """What a hand-built Trainer knows of its data (the :class:`DataSplits` fields tricks read): the
    training loader's dataset, and the shape of its first sample (read with the RNG put back after)."""

    val = test = eval_train = None
    kind = "image"

    def __init__(self, train_loader: Any) -> None:
        ds = getattr(train_loader, "dataset", None)
        self.train = ds.dataset if isinstance(ds, BatchGather) else ds
        self._shape: tuple[int, ...] | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        if self._shape is None:
            if self.train is None:
                raise RecipeError("the tricks need the shape of a training sample: pass a train_loader with a "
                                  ".dataset (a torch DataLoader)")
            rng = runtime.get_rng_state()
            try:
                self._shape = tuple(self.train[0][0].shape)
            finally:
                runtime.set_rng_state(rng)  # a random transform drew numbers: the run must not see it
        return self._shape


def _hand_recipe(tricks: Any, state: State, *, clip: Any, seed: int | None, monitor: str, mode: str) -> Recipe:
    """The recipe a hand-built Trainer's arguments amount to: its ``tricks`` section (validated as a recipe's)
    and the few keys tricks read, taken from the Trainer's arguments and its optimizer."""
    if isinstance(tricks, dict):
        section = {k: ({"enabled": True, **v} if isinstance(v, dict) else v) for k, v in tricks.items()}
    else:  # a TricksConfig, e.g. a recipe's
        section = tricks.model_dump()
    seed = torch.initial_seed() % 2**32 if seed is None else seed
    opt = state.optimizer.defaults
    val_bs = getattr(state.val_loader, "batch_size", None)
    recipe = recipe_from_dict({
        "tricks": section,
        "task": {"type": state.task.name} if state.task.name in ("multilabel", "regression") else {},
        "optim": {"lr": float(opt.get("lr", 0.01)), "weight_decay": float(opt.get("weight_decay", 0.0))},
        "data": {"batch_size": getattr(state.train_loader, "batch_size", None) or 1, "eval_batch_size": val_bs,
                 "pin_memory": False},
        "train": {"seed": seed, "epochs": state.max_epochs, "precision": state.precision, "device": "cpu",
                  "accumulate": state.accumulate, "clip": clip if isinstance(clip, (int, float)) else None,
                  "monitor": monitor, "mode": mode},
    })
    for name, trick in TRICKS.items():
        if trick.recipe_only and getattr(recipe.tricks, name).enabled:
            raise RecipeError(f"tricks.{name} cannot be set up by a hand-built Trainer: {trick.recipe_only}")
    return recipe


def _hand_context(recipe: Recipe, state: State, clip: Any, monitor: str, mode: str, loss_given: bool) -> BuildContext:
    data = _LoaderData(state.train_loader)
    try:
        steps_per_epoch = math.ceil(len(state.train_loader) / state.accumulate)
    except TypeError:  # an iterable without a length
        steps_per_epoch = 1
    num_outputs = getattr(state.task, "num_classes", None) or getattr(state.task, "num_labels", None) \
        or getattr(state.task, "num_targets", None)
    if not num_outputs:  # a classification task that infers its classes: the model's output on a sample tells
        num_outputs = _probe_outputs(state.model, data, state.device)
    opt = state.optimizer
    ctx = BuildContext(
        recipe=recipe, data=data, task=state.task, model=state.model, device=state.device,  # type: ignore[arg-type]
        dist=state.dist, loss_fn=state.loss_fn, loss_owner="loss_fn" if loss_given else "",
        train_loader=state.train_loader, val_loader=state.val_loader,
        test_loader=None, steps_per_epoch=steps_per_epoch, total_steps=steps_per_epoch * state.max_epochs,
        num_outputs=int(num_outputs), param_groups=[dict(g) for g in opt.param_groups],
        optimizer_spec=(type(opt), dict(opt.defaults)), clip=clip, monitor=monitor, mode=mode,
        weights_report=_GivenWeights(state.model),
    )
    ctx.optimizer_factory = _keep_optimizer(opt)
    ctx.loader_maker = lambda ds, train: make_loader(ds, recipe, train=train, dist=state.dist, device=state.device)
    ctx.model_loader = load_model
    return ctx


class _GivenWeights:
    """A hand-built Trainer's model holds the weights its caller gave it: all count as loaded (``tricks.freeze``)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.loaded = list(model.state_dict())


def _keep_optimizer(opt: torch.optim.Optimizer) -> Callable[[list[dict[str, Any]]], torch.optim.Optimizer]:
    return lambda groups: opt


def _probe_outputs(model: torch.nn.Module, data: _LoaderData, device: torch.device) -> int:
    was_training = model.training
    try:
        with torch.inference_mode():
            out = model.eval()(data.train[0][0].unsqueeze(0).to(device))  # type: ignore[index]
    finally:
        model.train(was_training)
    return int(out.shape[-1])


def set_up_plugins(state: State, tricks: Any, plugins: list[Plugin], *, clip: Any, scheduler: Any,
                   seed: int | None, monitor: str, mode: str, loss_given: bool = False) -> tuple[list[Plugin], Any]:
    """A hand-built Trainer's set-up, the recipe build's own: the ``tricks`` section validated and checked as a
    recipe's (one-line :class:`RecipeError` s), its plug-ins built, then with the ``plugins`` that need set-up,
    ``configure`` d, the optimizer rebuilt if a trick changed its groups or wraps it, the schedule made,
    ``after_optimizer``. Updates ``state`` (model, optimizer, scheduler, loss); returns (plug-ins, clip)."""
    recipe = _hand_recipe(tricks or {}, state, clip=clip, seed=seed, monitor=monitor, mode=mode)
    built = build_tricks(recipe)
    ctx = _hand_context(recipe, state, clip, monitor, mode, loss_given)
    groups, factory = ctx.param_groups, ctx.optimizer_factory
    pending = built + [p for p in plugins if p.needs_setup()]
    for p in pending:
        p.configure(ctx)
    if ctx.param_groups is not groups or ctx.optimizer_factory is not factory:
        if scheduler is not None and not callable(scheduler):
            raise RecipeError("the tricks build a new optimizer (param groups or a wrapper such as SAM), which the "
                              "scheduler you passed does not step; pass scheduler=lambda optimizer: <its scheduler>")
        if ctx.optimizer_factory is factory:  # new groups, the same kind of optimizer
            cls, kwargs = ctx.optimizer_spec
            ctx.optimizer_factory = lambda groups: cls(groups, **kwargs)
        try:
            ctx.optimizer = ctx.optimizer_factory(ctx.param_groups)  # type: ignore[misc]
        except TypeError as exc:
            raise RecipeError(f"the tricks rebuild the optimizer as {type(state.optimizer).__name__}(groups, "
                              f"**defaults), which failed: {exc}; use a torch optimizer") from None
    else:
        ctx.optimizer = state.optimizer
    ctx.scheduler = scheduler(ctx.optimizer) if callable(scheduler) else scheduler
    for p in pending:
        p.after_optimizer(ctx)
        p.set_up = True
    state.model, state.optimizer, state.scheduler, state.loss_fn = ctx.model, ctx.optimizer, ctx.scheduler, ctx.loss_fn
    return built + list(plugins), ctx.clip

