"""Sharpness-Aware Minimization (Foret et al. 2021) around the recipe's optimizer; ASAM (Kwon et al. 2021).

The trainer steps it as ``optimizer.step(closure)``; the closure re-runs forward and backward over
every micro-batch of the update. BatchNorm running statistics are frozen from the end of the first
pass to the end of the step, so only the first pass updates them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.errors import ConflictError, RecipeError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.interface import RecipeView
    from trickbag.plugin.state import State


class SAMConfig(TrickSection):
    """Sharpness-Aware Minimization (Foret et al. 2021) around the recipe's optimizer; ASAM with adaptive."""

    rho: float | None = Field(None, gt=0.0)  # neighbourhood radius; None: 0.05 (SAM) or 0.5 (ASAM, Kwon et al. 2021)
    adaptive: bool = False  # ASAM: the radius scales with |w| per element (scale-invariant sharpness)


class SAMPlugin(Plugin):
    """Wrap the recipe's optimizer in :class:`~trickbag.optim.SAM`; freeze BN statistics for the second pass."""

    name = "sam"

    def __init__(self, rho: float | None, adaptive: bool) -> None:
        self.rho = rho if rho is not None else (0.5 if adaptive else 0.05)
        self.adaptive = adaptive

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.optim import SAM

        made = ctx.make_optimizer
        if not isinstance(made, functools.partial) or not isinstance(made.func, type):
            raise RecipeError("tricks.sam wraps an optimizer class with its options; this run builds its optimizer "
                              f"with {made!r}: use a torch optimizer")
        base, rho, adaptive = made.func, self.rho, self.adaptive
        ctx.make_optimizer = functools.partial(SAM, base_optimizer=base, rho=rho, adaptive=adaptive, **made.keywords)
        log.info(f"{'ASAM' if adaptive else 'SAM'} (rho={rho}) around {base.__name__}: two passes per update")

    def on_after_backward(self, state: State) -> None:
        from trickbag.optim import disable_running_stats

        if not state.closure_pass:
            disable_running_stats(state.model)

    def on_step(self, state: State) -> None:
        from trickbag.optim import enable_running_stats

        enable_running_stats(state.model)

    def on_fit_end(self, state: State) -> None:
        from trickbag.optim import enable_running_stats

        enable_running_stats(state.model)


def build(cfg: SAMConfig) -> list[Plugin]:
    return [SAMPlugin(cfg.rho, cfg.adaptive)]


def check(recipe: RecipeView) -> None:
    """SAM with an optimizer whose :mod:`trickbag.optim.optimizers` entry refuses it (``no_sam``), or with
    Lookahead: not combined."""
    from trickbag.optim import optimizers

    why = optimizers.refusal(recipe.optim.name, "no_sam")
    if recipe.tricks.sam.enabled and why:
        raise ConflictError(f"tricks.sam with optim.name={recipe.optim.name} is not supported: {why}; use "
                            "optim.name=adamw or sgd with SAM")
    if recipe.tricks.sam.enabled and recipe.optim.lookahead_k:
        raise ConflictError("tricks.sam with optim.lookahead_k is not supported: SAM wraps the optimizer's step, "
                            "Lookahead its weights; keep one of them")


TRICK = Trick(
    name="sam",
    checks=(check,),
    after=("grad_norm",),  # the logged norm is the first pass's, before SAM's second pass
    config=SAMConfig,
    description="SAM / ASAM: minimise the worst loss within radius rho (Foret 2021, Kwon 2021); 2 passes",
    build=build,
)
