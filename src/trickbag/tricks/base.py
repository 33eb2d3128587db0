"""What a trick module declares (:class:`Trick`), and the few helpers several trick modules share.

A trick module (one file per recipe trick in this folder) holds the trick's recipe section (a
:class:`~trickbag.config.TrickSection`), its plug-in (a thin adapter: the math is in the library),
its interaction rules, its effect on evaluation and its one-line description, and ends with
``TRICK = Trick(...)``. Trick modules import no torch at import time, so the schema, ``trickbag
tricks`` and the recipe errors answer without it; the plug-ins import what they need when built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.context import sample_shape
from trickbag.plugin.interface import Plugin

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.interface import RecipeView
    from trickbag.plugin.state import State

__all__ = ["Trick", "ALL_TASKS", "GeneratorState", "WrapPredict", "EvalOnAverage", "image_shape", "add_raw_metrics"]

ALL_TASKS = ("classification", "multilabel", "regression")

#: ``wrap(forward) -> forward``: how a trick changes the model's predictions at evaluation
Wrapper = Callable[[Callable[[Any], Any]], Callable[[Any], Any]]


@dataclasses.dataclass(frozen=True)
class Trick:
    """One recipe trick, as the registry (:mod:`trickbag.tricks`) sees it.

    Attributes:
        name: the recipe key, ``tricks.<name>``.
        config: its recipe section.
        description: one line for ``trickbag tricks``.
        build: ``build(cfg) -> [Plugin, ...]`` for an enabled section: the trick's own section, and
            ``build(cfg, **joined)`` with the sections it names in ``joins`` (enabled or not) as keywords.
        joins: other tricks' sections this trick's build reads because one plug-in serves both (each for a
            reason stated beside it); a trick sees no other part of the recipe.
        checks: interaction rules ``check(recipe)``, run before anything is built; each raises a
            :class:`~trickbag.errors.RecipeError` / ``ConflictError`` naming the keys and the fix.
        tasks: the ``task.type`` values the trick makes sense for; any other is refused with ``why``.
        why: the reason given when the task does not fit.
        eval_wrapper: ``eval_wrapper(cfg, input_shape) -> wrap`` when the trick changes how a trained
            model predicts (TTA, the test size): ``trickbag eval``/``predict`` apply it as the run did.
        describe_eval: ``describe_eval(cfg) -> str``, the phrase ``eval``/``predict`` print for it.
        recipe_only: why a hand-built :class:`~trickbag.train.trainer.Trainer` cannot switch it on from
            ``tricks=`` and what to pass instead (empty: it can).
        after: tricks whose plug-ins must run before this one's (build seams and loop events; ``*_END``
            events reverse the order), each for a reason stated beside it.
        last: this trick's plug-ins run after every other trick's.
        unsharded: why the trick is refused under ``dist.strategy=fsdp`` (empty: it works on the sharded model).
    """

    name: str
    config: type[TrickSection]
    description: str
    build: Callable[..., list[Plugin]]
    checks: tuple[Callable[[RecipeView], None], ...] = ()
    tasks: tuple[str, ...] = ALL_TASKS
    why: str = ""
    eval_wrapper: Callable[[Any, tuple[int, ...]], Wrapper | None] | None = None
    describe_eval: Callable[[Any], str] | None = None
    recipe_only: str = ""
    after: tuple[str, ...] = ()
    last: bool = False
    unsharded: str = ""
    joins: tuple[str, ...] = ()


class GeneratorState:
    """Mix-in: checkpoint the trick's generator, so a resumed run draws the same masks and partners.

    Under DDP the checkpoint holds rank 0's generator; other ranks fork their own stream from it
    (:func:`trickbag.runtime.fork_generator`) so their augmentations keep differing after a resume. A sharded
    (FSDP) checkpoint holds every rank's: resumed on as many ranks, each takes its own (``this_rank``).
    """

    generator: Any
    rank: int = 0

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        from trickbag.runtime import fork_generator

        self.generator.set_state(state_dict["generator"])
        if not state_dict.get("this_rank"):  # rank 0's generator: other ranks fork their own stream from it
            fork_generator(self.generator, self.rank)


class WrapPredict(Plugin):
    """Install ``wrap(forward)`` as the evaluation forward at EVAL_START; restore it at EVAL_END.

    It composes with the other evaluation wrappers (in plug-in order) and with weight swapping.
    """

    def __init__(self, name: str, wrap: Wrapper) -> None:
        self.trick, self.wrap = name, wrap
        self._prev: Any = None

    @property
    def key(self) -> str:
        return f"wrap:{self.trick}"

    def on_eval_start(self, state: State) -> None:
        self._prev = state.predict
        state.predict = self.wrap(state.predict or state.model)

    def on_eval_end(self, state: State) -> None:
        state.predict = self._prev
        self._prev = None


class EvalOnAverage(Plugin):
    """Base of the plug-ins that evaluate averaged weights (EMA, SWA).

    :meth:`swap_in` (at EVAL_START) enters the average's ``swapped(model)`` context, which puts the
    averaged weights into the model; EVAL_END leaves it, restoring the raw weights, and when
    :attr:`eval_raw` evaluates those too (:func:`add_raw_metrics`).
    """

    eval_raw = True
    _swap: Any = None

    def swap_in(self, swapped: Any) -> None:
        self._swap = swapped
        swapped.__enter__()

    def on_eval_end(self, state: State) -> None:
        if self._swap is None:
            return
        self._swap.__exit__(None, None, None)
        self._swap = None
        if self.eval_raw:
            add_raw_metrics(state)


def image_shape(ctx: TrickContext, trick: str) -> tuple[int, ...]:
    """The per-sample shape ``[C, H, W]`` of image data, or a :class:`RecipeError` naming the trick."""
    shape = tuple(sample_shape(ctx.train_set))
    if len(shape) != 3:
        raise RecipeError(
            f"tricks.{trick} works on images [C, H, W]; the training samples have "
            f"shape {list(shape)}: turn tricks.{trick} off for this data"
        )
    return shape


def add_raw_metrics(state: State) -> None:
    """After an averaged model was evaluated (EMA, SWA), evaluate the raw weights on the validation
    loader too and add them to ``state.eval_metrics`` as ``<metric>_raw``."""
    if state.services is None or state.val_loader is None:
        return
    raw = state.services.eval_loop(state.val_loader)
    for k, v in raw.items():
        if k != "n" and isinstance(v, float):
            state.eval_metrics[f"{k}_raw"] = v
