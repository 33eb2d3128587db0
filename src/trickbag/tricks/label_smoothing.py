"""Label smoothing (Szegedy et al. 2016): train on ``(1 - eps) * onehot + eps / C``.

Applied exactly once: by the loss when ``mix`` is off, folded into the mixed targets by ``mix``
when it is on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.plugin.interface import Plugin
from trickbag.tricks._loss import CLASSIFICATION_ONLY, classification_loss
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext


class LabelSmoothingConfig(TrickSection):
    """Label smoothing (Szegedy et al. 2016): train on ``(1 - eps) * onehot + eps / C``."""

    eps: float = Field(0.1, ge=0.0, lt=1.0)  # probability mass spread evenly over all C classes (paper: 0.1)


class LabelSmoothingPlugin(Plugin):
    """Set the smoothing of the run's classification loss (0 when ``mix`` folds it into its targets)."""

    name = "label_smoothing"

    def __init__(self, eps: float, folded_into_mix: bool) -> None:
        self.eps, self.folded = eps, folded_into_mix

    def configure(self, ctx: TrickContext) -> None:
        classification_loss(ctx, "label_smoothing").smoothing = 0.0 if self.folded else self.eps


def build(cfg: LabelSmoothingConfig, mix: Any) -> list[Plugin]:
    return [LabelSmoothingPlugin(cfg.eps, folded_into_mix=mix.enabled)]


TRICK = Trick(
    name="label_smoothing",
    joins=("mix",),  # with mix on, the smoothing goes into the mixed targets and the loss stays unsmoothed
    config=LabelSmoothingConfig,
    description="Label smoothing: (1 - eps) * onehot + eps / C targets, applied once (Szegedy 2016)",
    build=build,
    tasks=CLASSIFICATION_ONLY,
    why="it smooths one-hot class targets; multi-label and regression targets have no classes to spread over",
)
