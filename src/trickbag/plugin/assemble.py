"""Set tricks up on a :class:`~trickbag.plugin.context.TrickContext`: one sequence for every trainer that runs them.

The recipe build, a hand-built :class:`~trickbag.train.trainer.Trainer` and the adapters for other trainers
each make a context from what they have, then call :func:`assemble`: every plug-in's ``configure`` (on the
context), the caller's step before the optimizer exists (DDP / FSDP wrapping in the recipe build), the optimizer
(kept when no trick changed how it is built), the schedule, every plug-in's ``after_optimizer`` (on
:class:`~trickbag.plugin.context.Built`).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from trickbag.errors import ConflictError, RecipeError
from trickbag.plugin.context import Built, TrickContext, log
from trickbag.plugin.interface import Plugin

if TYPE_CHECKING:
    import torch

__all__ = ["assemble", "Assembly", "LegacyContext", "collect_notes"]


class Assembly(NamedTuple):
    """What :func:`assemble` set up: the plug-ins in the order they were, the optimizer the run steps and its
    schedule (None: none)."""

    plugins: list[Plugin]
    optimizer: torch.optim.Optimizer
    scheduler: Any


class _Notes(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.INFO)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


@contextlib.contextmanager
def collect_notes(into: list[str] | None) -> Iterator[None]:
    """While inside, what tricks log on ``trickbag.tricks`` (:data:`trickbag.plugin.context.log`) at INFO and above
    is appended to ``into`` -- the lines a run prints when it starts -- and goes nowhere else; ``None``: the
    records go where the program's logging configuration sends them."""
    if into is None:
        yield
        return
    handler, level, propagate = _Notes(into), log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


def assemble(ctx: TrickContext, tricks: Sequence[Plugin], plugins: Sequence[Plugin] = (), *,
             schedule: Callable[[torch.optim.Optimizer], Any], keep: torch.optim.Optimizer | None = None,
             given_loss: bool = False, before_optimizer: Callable[[TrickContext], None] | None = None,
             legacy: Callable[[TrickContext], Any] | None = None, notes: list[str] | None = None,
             sampler: bool = False) -> Assembly:
    """Set up ``tricks`` (recipe tricks' plug-ins) and the ``plugins`` that have build-time seams on ``ctx``.

    Args:
        schedule: ``schedule(optimizer) -> scheduler or None``, called with the optimizer the run will step.
        keep: the caller's optimizer, used as it is when no plug-in changed the groups or how it is built.
        given_loss: the caller chose ``ctx.loss_fn``; a trick that replaces it is refused in one line.
        before_optimizer: the caller's step after ``configure`` and before the optimizer is built.
        legacy: what a plug-in that is not a recipe trick receives instead of ``ctx`` (the deprecated
            attributes of the former build context); None: ``ctx`` itself.
        notes: where what the tricks log while they are set up goes (:func:`collect_notes`).
        sampler: the caller's training loader takes ``ctx.sample_weights`` (a recipe's); otherwise a plug-in that
            sets them is refused in one line.

    Returns the plug-ins that were set up, the optimizer and the schedule (an :class:`Assembly`)."""
    trick_ids = {id(p) for p in tricks}
    pending = list(tricks) + [p for p in plugins if p.needs_setup()]
    view = {id(p): (ctx if id(p) in trick_ids or legacy is None else legacy(ctx)) for p in pending}
    groups, make = ctx.param_groups, ctx.make_optimizer
    with collect_notes(notes):
        for p in pending:
            before = ctx.loss_fn
            p.configure(view[id(p)])
            if given_loss and id(p) in trick_ids and ctx.loss_fn is not before:
                raise ConflictError(f"tricks.{p.name} changes the loss, but loss_fn already replaced it by "
                                    f"{before!r}; turn one of them off")
            if not sampler and ctx.sample_weights is not None:
                raise ConflictError(f"{p.name} sets the training sampler's weights, which only a recipe's loader "
                                    "takes; this trainer draws from its own DataLoader (give it a "
                                    "torch.utils.data.WeightedRandomSampler instead)")
        if before_optimizer is not None:
            before_optimizer(ctx)
        keep_it = keep is not None and ctx.param_groups is groups and ctx.make_optimizer is make
        optimizer = keep if keep_it and keep is not None else _build_optimizer(ctx)
        scheduler = schedule(optimizer)
        built = Built(ctx.model, optimizer, scheduler)
        for v in view.values():
            if isinstance(v, LegacyContext):
                v.built(optimizer, scheduler)
        for p in pending:
            v = view[id(p)]
            p.after_optimizer(v if isinstance(v, LegacyContext) else built)  # type: ignore[arg-type]  # a legacy plug-in's view answers the same names
            p.set_up = True
    return Assembly(pending, optimizer, scheduler)


def _build_optimizer(ctx: TrickContext) -> torch.optim.Optimizer:
    try:
        return ctx.make_optimizer(ctx.param_groups)
    except TypeError as exc:
        raise RecipeError(f"the tricks rebuild the optimizer with {ctx.make_optimizer!r} on their parameter groups, "
                          f"which failed: {exc}; use a torch optimizer") from None


#: former build-context names and the trick context's names they became
_RENAMED = {"steps_per_epoch": "updates_per_epoch", "optimizer_factory": "make_optimizer"}


class LegacyContext:
    """The trick context as a plug-in written for the former ``BuildContext`` sees it (``train.plugins`` and
    plug-ins passed to a Trainer), for one release: the context's own names work as they are; the former names
    still answer, each with a ``DeprecationWarning`` naming what replaces it.

    ``former`` holds the former attributes that have no place in the trick context (``recipe``, ``task``,
    ``train_loader``, ``monitor``, ``device``, ``world_size``, ...)."""

    def __init__(self, ctx: TrickContext, former: Any = None) -> None:
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "_former", former)
        object.__setattr__(self, "_built", {})

    def built(self, optimizer: torch.optim.Optimizer, scheduler: Any) -> None:
        """Called by :func:`assemble` once the optimizer and the schedule exist (``after_optimizer`` reads them)."""
        self._built.update(optimizer=optimizer, scheduler=scheduler)

    def note(self, text: str) -> None:
        _warn("note", "trickbag.plugin.context.log.info(text)")
        log.info(text)

    def __getattr__(self, name: str) -> Any:
        ctx = self._ctx
        if name in _RENAMED:
            _warn(name, f"ctx.{_RENAMED[name]}")
            return getattr(ctx, _RENAMED[name])
        if name == "optimizer_spec":
            _warn(name, "ctx.make_optimizer (a functools.partial of the class and its options)")
            made = ctx.make_optimizer
            return (made.func, dict(made.keywords)) if hasattr(made, "func") else (type(None), {})
        if name == "notes":
            _warn(name, "trickbag.plugin.context.log.info(text)")
            return _LoggedNotes()
        if name in self._built:
            _warn(name, f"state.{name} in a run-time event (on_fit_start, ...)")
            return self._built[name]
        if hasattr(ctx, name) and not name.startswith("_"):
            return getattr(ctx, name)
        if name == "device" and getattr(self._former, "device", None) is None:
            from trickbag.nn import device_of

            _warn(name, "trickbag.nn.device_of(ctx.model)")
            return device_of(ctx.model)
        if self._former is not None and hasattr(self._former, name):
            _warn(name, "the trick context (trickbag.plugin.context.TrickContext)")
            return getattr(self._former, name)
        raise AttributeError(f"the trick context has no {name!r}; see trickbag.plugin.context.TrickContext")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _RENAMED:
            _warn(name, f"ctx.{_RENAMED[name]}")
            name = _RENAMED[name]
        setattr(self._ctx, name, value)


class _LoggedNotes(list[str]):
    """The former ``notes`` list: a line appended is logged as a trick's note."""

    def append(self, text: str) -> None:
        log.info(str(text))


def _warn(name: str, instead: str) -> None:
    warnings.warn(f"the build context's {name!r} is deprecated and goes in the next release; use {instead}",
                  DeprecationWarning, stacklevel=3)
