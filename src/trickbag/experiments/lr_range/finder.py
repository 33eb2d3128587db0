"""``trickbag lr-find RECIPE``: the LR range test as a plug-in on the one run path.

:func:`lr_find_recipe` runs the recipe through :func:`trickbag.runs.run.run_recipe` with an
:class:`LRFinder` plug-in, no run directory and no evaluation, so every part of the recipe
(precision, accumulation, SAM, mixup, clipping, the non-finite guard, ...) acts during the test
exactly as it does in training; only the LR is the finder's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trickbag.experiments import ExperimentError
from trickbag.experiments.lr_range.range_test import RULES, LRFindResult, RangeTest, Rule, set_group_lrs
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import StopReason

if TYPE_CHECKING:
    from trickbag.plugin.state import State
    from trickbag.recipe import Recipe

__all__ = ["LRFinder", "lr_find_recipe"]


class LRFinder(Plugin):
    """Drive a :class:`RangeTest` from inside a training run.

    At the first micro-batch of every update (BATCH_START, after the previous update's schedule
    step, so the schedule cannot move it) every param group's LR is set to
    ``lr_i * (group base LR / group 0 base LR)``; the update's loss (mean over its micro-batches,
    first pass of a two-pass optimizer such as SAM, after every loss plug-in) is recorded at STEP.
    The run is stopped (:attr:`StopReason.REQUESTED`) after ``test.steps`` updates, on divergence,
    or on a non-finite loss or gradients. An update the fp16 GradScaler skipped (overflow) is not
    counted: the next update tries the same LR again.

    >>> finder = LRFinder(RangeTest(steps=10, start=1e-4, end=1.0))
    >>> finder.test.next_lr
    0.0001
    """

    name = "lr_finder"

    def __init__(self, test: RangeTest) -> None:
        self.test = test
        self._bases: list[float] = []
        self._lr: float | None = None
        self._loss_sum: Any = None
        self._n = 0
        self._nonfinite = 0

    def on_fit_start(self, state: State) -> None:
        self._nonfinite = state.nonfinite_skipped

    def on_batch_start(self, state: State) -> None:
        if self._lr is None and not self.test.done:
            self._lr = self.test.next_lr
            set_group_lrs(state.optimizer.param_groups, self._lr, self._bases)

    def on_loss(self, state: State) -> None:
        if state.closure_pass or state.loss is None:
            return
        loss = state.loss.detach().float()
        self._loss_sum = loss if self._loss_sum is None else self._loss_sum + loss
        self._n += 1

    def on_step(self, state: State) -> None:
        if self._lr is None or not self._n:
            return
        lr, value = self._lr, float(self._loss_sum) / self._n
        self._lr, self._loss_sum, self._n = None, None, 0
        vetoed = state.nonfinite_skipped > self._nonfinite  # the non-finite guard refused this update
        self._nonfinite = state.nonfinite_skipped
        if math.isfinite(value) and vetoed:
            self.test.stop(f"gradients not finite at lr {lr:.3g}")
        elif math.isfinite(value) and state.step_skipped:
            return  # fp16 overflow: the GradScaler lowered its scale; the same LR again
        else:
            self.test.record(lr, value)
        if self.test.done:
            state.stop(StopReason.REQUESTED, f"lr-find: {self.test.stop_reason or 'all steps done'}")

    def on_fit_end(self, state: State) -> None:
        if not self.test.done and state.stop_reason not in (None, StopReason.REQUESTED):
            self.test.stop(state.stop_message or "the run stopped")


def _check(steps: int, start: float, end: float, beta: float, diverge: float, rule: str) -> RangeTest:
    if not 0 < start < end:
        raise ExperimentError(f"--start must be below --end (both > 0), got --start {start:g} --end {end:g}")
    if not 0.0 <= beta < 1.0:
        raise ExperimentError(f"--beta must be in [0, 1), got {beta:g}")
    if not diverge > 1.0:
        raise ExperimentError(f"--diverge must be > 1 (times the best smoothed loss), got {diverge:g}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ExperimentError(f"--steps must be an integer >= 2, got {steps!r}")
    if rule not in RULES:
        raise ExperimentError(f"--rule {rule!r} is not allowed; allowed: {', '.join(RULES)}")
    return RangeTest(steps, start, end, beta, diverge)


def finder_recipe(recipe: Recipe, steps: int) -> Recipe:
    """``recipe`` with enough epochs for ``steps`` updates (each epoch has at least one) and no evaluation."""
    from trickbag.recipe import recipe_from_dict

    data = recipe.model_dump(mode="json")
    epochs = max(recipe.train.epochs, steps)
    data["train"].update(epochs=epochs, eval_every=epochs + 1)
    data["run"].update(progress=False)
    return recipe_from_dict(data)


def lr_find_recipe(
    recipe: str,
    overrides: Sequence[str] = (),
    *,
    steps: int = 200,
    start: float = 1e-6,
    end: float = 10.0,
    beta: float = 0.9,
    diverge: float = 4.0,
    rule: Rule = "valley",
    out: str | Path | None = None,
    plugins: Sequence[Plugin] = (),
) -> tuple[LRFindResult, list[Path]]:
    """Range test of a recipe on the run path; writes ``lr_find.png`` and ``lr_find.csv`` into ``out``.

    The recipe runs through :func:`~trickbag.runs.run.run_recipe` (``write=False``, ``test=False``)
    with an :class:`LRFinder` (plus ``plugins``, run after it): its model, data, loss, optimizer and
    every trick apply; no run directory is written and nothing is evaluated. ``out`` defaults to
    ``./lr-find-<recipe name>`` (not under ``run.dir``, which holds run directories only).
    """
    from trickbag.experiments.lr_range.plot import write_lr_find
    from trickbag.recipe import load_recipe
    from trickbag.runs.run import run_recipe

    test = _check(steps, start, end, beta, diverge, rule)
    base = load_recipe(recipe, list(overrides))
    out_dir = Path(out) if out is not None else Path(f"lr-find-{base.name}")
    if out_dir.exists() and not out_dir.is_dir():
        raise ExperimentError(f"--out {str(out_dir)!r} is a file; give a folder")
    result = run_recipe(finder_recipe(base, steps), plugins=[LRFinder(test), *plugins], write=False, test=False,
                        quiet=True)
    if result.interrupted:
        raise KeyboardInterrupt
    try:
        res = test.result(rule)
    except ValueError as exc:  # e.g. the very first loss is not finite
        raise ExperimentError(f"lr-find on recipe {base.name!r}: {exc}") from None
    return res, write_lr_find(res, out_dir)
