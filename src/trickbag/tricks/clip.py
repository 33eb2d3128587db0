"""Gradient clipping once per update: global norm, element value, or adaptive (AGC, Brock et al. 2021).

The trainer clips in one place, after AFTER_BACKWARD and the non-finite check, on unscaled
gradients; this trick only chooses the rule (``train.clip`` is the plain global-norm rule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.errors import ConflictError
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.interface import RecipeView


class ClipConfig(TrickSection):
    """Gradient clipping once per update: global norm, element value, or adaptive (AGC)."""

    mode: Literal["norm", "value", "agc"] = "norm"  # norm: global L2 norm; value: clamp each element; agc: per unit, relative to its weight  # noqa: E501 (a key's help is the comment on its line)
    max_norm: float = Field(1.0, gt=0.0)  # norm: largest global L2 norm of all gradients together
    value: float = Field(1.0, gt=0.0)  # value: clamp every gradient element to [-value, value]
    clip_factor: float = Field(0.01, gt=0.0)  # agc: largest ||grad|| / ||weight|| per unit (Brock et al. 2021: 0.01)
    eps: float = Field(1e-3, gt=0.0)  # agc: floor of a unit's weight norm, so zero-initialised units can move
    exclude_head: bool = True  # agc: leave the final classifier layer unclipped, as the paper does


class ClipPlugin(Plugin):
    """Give the trainer its clipping rule (:func:`~trickbag.optim.clip_gradients` /
    :func:`~trickbag.optim.adaptive_clip_gradients`); norm and value modes record the norm before clipping."""

    name = "clip"

    def __init__(self, cfg: ClipConfig) -> None:
        self.cfg = cfg

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.optim import adaptive_clip_gradients, clip_gradients

        c = self.cfg
        if c.mode == "norm":
            ctx.clip = lambda params: clip_gradients(params, norm=c.max_norm)
        elif c.mode == "value":
            ctx.clip = lambda params: clip_gradients(params, value=c.value)
        else:
            head = self._head(ctx) if c.exclude_head else set()

            def agc(params: list[Any]) -> None:
                adaptive_clip_gradients([p for p in params if id(p) not in head], c.clip_factor, c.eps)

            ctx.clip = agc

    def _head(self, ctx: TrickContext) -> set[int]:
        import torch

        k = ctx.num_outputs
        heads = [m for m in ctx.model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == k]
        if not heads:
            log.info(f"AGC: no Linear layer with {k} outputs found; every parameter is clipped")
            return set()
        log.info("AGC: the classifier layer (last Linear) is not clipped")
        return {id(p) for p in heads[-1].parameters()}


def build(cfg: ClipConfig) -> list[Plugin]:
    return [ClipPlugin(cfg)]


def check(recipe: RecipeView) -> None:
    """Gradients are clipped by one rule: train.clip or tricks.clip."""
    if recipe.tricks.clip.enabled and recipe.train.clip is not None:
        raise ConflictError(
            f"train.clip={recipe.train.clip} and tricks.clip both clip the gradients; keep one "
            f"(train.clip=null to use tricks.clip.mode={recipe.tricks.clip.mode})"
        )


TRICK = Trick(
    name="clip",
    config=ClipConfig,
    description="Gradient clipping once per update: global norm, value, or adaptive AGC (Brock et al. 2021)",
    build=build,
    checks=(check,),
)
