"""Softmax focal loss (Lin et al. 2017) as the training loss: down-weight easy examples."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.interface import Plugin
from trickbag.tricks._loss import CLASSIFICATION_ONLY, classification_loss
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext


class FocalConfig(TrickSection):
    """Softmax focal loss (Lin et al. 2017) instead of cross-entropy."""

    gamma: float = Field(2.0, ge=0.0)  # focusing exponent on (1 - p); 0 is cross-entropy (paper: 2)
    alpha: float | list[float] | None = None  # C per-class balancing factors, or one value a for C=2: [1-a, a]

    @field_validator("alpha")
    @classmethod
    def _alpha_range(cls, v: float | list[float] | None) -> float | list[float] | None:
        if isinstance(v, list) and (not v or any(a < 0 for a in v)):
            raise ValueError("must be a non-empty list of per-class factors >= 0")
        if isinstance(v, float) and not 0.0 <= v <= 1.0:
            raise ValueError("a single alpha must lie in [0, 1] (binary convention)")
        return v


class FocalPlugin(Plugin):
    """Make the run's classification loss a focal loss with ``gamma`` and ``alpha``."""

    name = "focal"

    def __init__(self, gamma: float, alpha: float | list[float] | None) -> None:
        self.gamma, self.alpha = gamma, alpha

    def _alpha(self, c: int, device: Any) -> Any:
        if isinstance(self.alpha, list):
            if len(self.alpha) != c:
                raise RecipeError(f"tricks.focal.alpha has {len(self.alpha)} values but the model has {c} classes; "
                                  "give one factor per class")
            import torch

            return torch.tensor(self.alpha, dtype=torch.float32, device=device)
        if self.alpha is not None and c != 2:
            raise RecipeError(
                f"tricks.focal.alpha={self.alpha} (a single value) is the binary convention and needs 2 classes, "
                f"the model has {c}; give a list of {c} per-class factors"
            )
        return None if self.alpha is None else float(self.alpha)

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.nn import device_of

        alpha = self._alpha(ctx.num_outputs, device_of(ctx.model))
        loss = classification_loss(ctx, "focal")
        loss.gamma, loss.alpha = self.gamma, alpha


def build(cfg: FocalConfig) -> list[Plugin]:
    return [FocalPlugin(cfg.gamma, cfg.alpha)]


TRICK = Trick(
    name="focal",
    config=FocalConfig,
    description="Focal loss: down-weight easy examples by (1 - p)^gamma (Lin et al. 2017)",
    build=build,
    tasks=CLASSIFICATION_ONLY,
    why="it re-weights the softmax probability of the true class; use it for single-label classification",
)
