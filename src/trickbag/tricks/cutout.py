"""Cutout (DeVries & Taylor 2017): blank one random square per training image at BATCH_START."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import GeneratorState, Trick, image_shape

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.state import State


class CutoutConfig(TrickSection):
    """Cutout (DeVries & Taylor 2017): blank one square per training image."""

    size: int | None = Field(None, ge=1)  # square side in pixels; None: half the shorter image side (16 of 32)
    prob: float = Field(1.0, ge=0.0, le=1.0)  # probability that an image gets a square


class CutoutPlugin(GeneratorState, Plugin):
    """:func:`trickbag.data.cutout` on ``state.batch`` at BATCH_START, with the trick's own generator."""

    name = "cutout"

    def __init__(self, size: int | None, prob: float) -> None:
        self.size, self.prob = size, prob

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.runtime import trick_generator

        shape = image_shape(ctx, "cutout")
        self.size = self.size or max(1, min(shape[1:]) // 2)
        self.rank = ctx.rank
        self.generator = trick_generator(ctx.seed, "cutout", self.rank)
        log.info(f"cutout: one {self.size}x{self.size} square per image with probability {self.prob}")

    def on_batch_start(self, state: State) -> None:
        from trickbag.data import cutout

        if self.size is None:  # configure() fills in the default size from the data
            raise RuntimeError("cutout: configure() sets the square's size before the first batch")
        x = state.batch[0]
        state.batch = (cutout(x, self.size, generator=self.generator, prob=self.prob), *state.batch[1:])


def build(cfg: CutoutConfig) -> list[Plugin]:
    return [CutoutPlugin(cfg.size, cfg.prob)]


TRICK = Trick(
    name="cutout",
    config=CutoutConfig,
    description="Cutout: blank one random square per training image (DeVries & Taylor 2017)",
    build=build,
)
