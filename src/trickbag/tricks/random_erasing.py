"""Random erasing (Zhong et al. 2020): fill one random rectangle per training image at BATCH_START."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from pydantic import Field, field_validator

from trickbag.config import TrickSection
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import GeneratorState, Trick, image_shape

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.state import State


class RandomErasingConfig(TrickSection):
    """Random erasing (Zhong et al. 2020): fill one random rectangle per training image."""

    prob: float = Field(0.25, ge=0.0, le=1.0)  # probability that an image is erased (timm/DeiT reprob: 0.25)
    scale: list[float] = Field(default_factory=lambda: [0.02, 0.33])  # [low, high] erased area, fraction of the image  # noqa: E501 (a key's help is the comment on its line)
    ratio: list[float] = Field(default_factory=lambda: [0.3, 3.3])  # [low, high] aspect ratio h/w, drawn log-uniform  # noqa: E501 (a key's help is the comment on its line)
    fill: Literal["const", "rand", "pixel"] = "const"  # const: value; rand: N(0,1) per channel; pixel: per pixel (timm)
    value: float = 0.0  # fill of const (0: the mean, after normalisation)

    @field_validator("scale")
    @classmethod
    def _scale(cls, v: list[float]) -> list[float]:
        if len(v) != 2 or not 0.0 < v[0] <= v[1] <= 1.0:
            raise ValueError(f"give [low, high] with 0 < low <= high <= 1 (e.g. [0.02, 0.33]), got {v}")
        return v

    @field_validator("ratio")
    @classmethod
    def _ratio(cls, v: list[float]) -> list[float]:
        if len(v) != 2 or not 0.0 < v[0] <= v[1]:
            raise ValueError(f"give [low, high] with 0 < low <= high (e.g. [0.3, 3.3]), got {v}")
        return v


class _ErasingArgs(TypedDict):
    """The keyword arguments of :func:`trickbag.data.random_erasing` the plug-in passes."""

    prob: float
    scale: tuple[float, ...]
    ratio: tuple[float, ...]
    fill: Literal["const", "rand", "pixel"]
    value: float


class RandomErasingPlugin(GeneratorState, Plugin):
    """:func:`trickbag.data.random_erasing` on ``state.batch`` at BATCH_START, with the trick's own generator."""

    name = "random_erasing"

    def __init__(self, cfg: RandomErasingConfig) -> None:
        self.kw = _ErasingArgs(prob=cfg.prob, scale=tuple(cfg.scale), ratio=tuple(cfg.ratio), fill=cfg.fill,
                               value=cfg.value)

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.runtime import trick_generator

        image_shape(ctx, "random_erasing")
        self.rank = ctx.rank
        self.generator = trick_generator(ctx.seed, "random_erasing", self.rank)
        k = self.kw
        log.info(f"random_erasing: one rectangle per image with probability {k['prob']}, area "
                         f"{k['scale'][0]:.3g}..{k['scale'][1]:.3g} of the image, fill {k['fill']}")

    def on_batch_start(self, state: State) -> None:
        from trickbag.data import random_erasing

        x = state.batch[0]
        state.batch = (random_erasing(x, generator=self.generator, **self.kw), *state.batch[1:])


def build(cfg: RandomErasingConfig) -> list[Plugin]:
    return [RandomErasingPlugin(cfg)]


TRICK = Trick(
    name="random_erasing",
    config=RandomErasingConfig,
    description="Random erasing: fill one random rectangle per training image (Zhong et al. 2020)",
    build=build,
)
