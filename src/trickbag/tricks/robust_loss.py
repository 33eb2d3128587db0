"""A loss robust to noisy labels instead of cross-entropy: symmetric (Wang et al. 2019) or generalized (Zhang &
Sabuncu 2018) cross-entropy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.errors import ConflictError
from trickbag.plugin.interface import Plugin
from trickbag.tricks._loss import CLASSIFICATION_ONLY, classification_loss
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.interface import RecipeView


class RobustLossConfig(TrickSection):
    """A noise-robust classification loss: ``sce`` (alpha * CE + beta * reverse CE) or ``gce`` ((1 - p_y^q) / q)."""

    kind: Literal["sce", "gce"] = "sce"  # sce: Wang et al. 2019; gce: Zhang & Sabuncu 2018
    alpha: float = Field(0.1, ge=0.0)  # sce: weight of cross-entropy (paper, CIFAR-10: 0.1)
    beta: float = Field(1.0, ge=0.0)  # sce: weight of the reverse cross-entropy, log 0 taken as log 1e-4 (paper: 1)
    q: float = Field(0.7, gt=0.0, le=1.0)  # gce: toward 0 cross-entropy, 1 mean absolute error (paper: 0.7)


class RobustLossPlugin(Plugin):
    """Make the run's classification loss the configured noise-robust loss (class weights and label smoothing
    still apply)."""

    name = "robust_loss"

    def __init__(self, cfg: RobustLossConfig) -> None:
        self.cfg = cfg

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.losses import RobustLoss

        c = self.cfg
        classification_loss(ctx, "robust_loss").robust = RobustLoss(c.kind, alpha=c.alpha, beta=c.beta, q=c.q)


def build(cfg: RobustLossConfig) -> list[Plugin]:
    return [RobustLossPlugin(cfg)]


def check(recipe: RecipeView) -> None:
    """Focal loss and a robust loss both replace cross-entropy: one of them."""
    if recipe.tricks.robust_loss.enabled and recipe.tricks.focal.enabled:
        raise ConflictError("tricks.focal and tricks.robust_loss both replace the cross-entropy loss; keep one "
                            "(tricks.focal.enabled=false or tricks.robust_loss.enabled=false)")


TRICK = Trick(
    name="robust_loss",
    config=RobustLossConfig,
    description="Loss robust to noisy labels: symmetric CE (Wang 2019) or generalized CE (Zhang & Sabuncu 2018)",
    build=build,
    checks=(check,),
    tasks=CLASSIFICATION_ONLY,
    why="it bounds the pull of single-label class targets the network finds unlikely; use it for single-label "
        "classification",
)
