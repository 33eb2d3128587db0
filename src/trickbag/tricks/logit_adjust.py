"""Logit-adjusted loss from the training set's class counts, for long-tailed data (Menon et al. 2021)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks._loss import CLASSIFICATION_ONLY, classification_loss, training_counts
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext


class LogitAdjustConfig(TrickSection):
    """Train on ``loss(logits + tau * log(prior), y)``, predict with the plain logits (Menon et al. 2021)."""

    tau: float = Field(1.0, ge=0.0, allow_inf_nan=False)  # 1: the paper's (Fisher-consistent for balanced error)


class LogitAdjustPlugin(Plugin):
    """Offsets ``tau * log(n_c / N)`` added to the logits inside the run's classification loss."""

    name = "logit_adjust"

    def __init__(self, tau: float) -> None:
        self.tau = tau

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.losses import logit_adjustment
        from trickbag.nn import device_of

        counts = training_counts(ctx, "logit_adjust", "add the offsets in your loss yourself")
        try:
            offsets = logit_adjustment(counts, self.tau)
        except ValueError as exc:
            raise RecipeError(f"tricks.logit_adjust: {exc}") from None
        classification_loss(ctx, "logit_adjust").logit_offset = offsets.to(device_of(ctx.model))
        log.info("logit adjustment offsets: " + ", ".join(f"{o:.3g}" for o in offsets.tolist()))


def build(cfg: LogitAdjustConfig) -> list[Plugin]:
    return [LogitAdjustPlugin(cfg.tau)]


TRICK = Trick(
    name="logit_adjust",
    config=LogitAdjustConfig,
    description="Logit-adjusted loss from training-set class counts, for long-tailed data (Menon et al. 2021)",
    build=build,
    tasks=CLASSIFICATION_ONLY,
    why="its offsets come from the number of training samples per class",
    recipe_only="it needs the training set's class counts, which only a recipe's data source gives; add "
                "trickbag.losses.logit_adjustment(counts, tau) to the logits inside your loss",
)
