"""Class-balanced loss weights from the training set's class counts (Cui et al. 2019)."""

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


class ClassBalancedConfig(TrickSection):
    """Class-balanced loss weights from the effective number of samples (Cui et al. 2019)."""

    beta: float = Field(0.9999, ge=0.0, lt=1.0)  # w_c ~ (1 - beta) / (1 - beta^n_c); 0: no re-weighting (paper)


class ClassBalancedPlugin(Plugin):
    """Per-class weights of the run's classification loss (focal takes them too)."""

    name = "class_balanced"

    def __init__(self, beta: float) -> None:
        self.beta = beta

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.losses import class_balanced_weights
        from trickbag.nn import device_of

        counts = training_counts(ctx, "class_balanced", "weight the loss yourself")
        try:
            weight = class_balanced_weights(counts, self.beta)
        except ValueError as exc:
            raise RecipeError(f"tricks.class_balanced: {exc}") from None
        classification_loss(ctx, "class_balanced").weight = weight.to(device_of(ctx.model))
        log.info("class-balanced weights: " + ", ".join(f"{w:.3g}" for w in weight.tolist()))


def build(cfg: ClassBalancedConfig) -> list[Plugin]:
    return [ClassBalancedPlugin(cfg.beta)]


TRICK = Trick(
    name="class_balanced",
    config=ClassBalancedConfig,
    description="Class-balanced loss weights from training-set class counts (Cui et al. 2019)",
    build=build,
    tasks=CLASSIFICATION_ONLY,
    why="its weights come from the number of training samples per class",
    recipe_only="it needs the training set's class counts, which only a recipe's data source gives; pass "
                "loss_fn=torch.nn.CrossEntropyLoss(weight=trickbag.losses.class_balanced_weights(counts, beta))",
)
