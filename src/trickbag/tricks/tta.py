"""Test-time augmentation at evaluation: average the predictions on flipped inputs (:func:`trickbag.nn.flip_tta`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from trickbag.config import TrickSection
from trickbag.errors import RecipeError
from trickbag.plugin.context import sample_shape
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick, WrapPredict

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.interface import RecipeView


class TTAConfig(TrickSection):
    """Test-time augmentation at evaluation: average the predictions on flipped inputs."""

    hflip: bool = True  # add the input flipped along the last dimension (width)
    vflip: bool = False  # add the input flipped along the height (images [N, C, H, W] only)
    average: Literal["probs", "logits"] = "probs"  # average softmax probabilities (output: their log) or logits


def eval_wrapper(cfg: TTAConfig, input_shape: tuple[int, ...]) -> Any:
    """Predictions averaged over the configured flips."""
    hflip, vflip, average = cfg.hflip, cfg.vflip, cfg.average

    def wrap(forward: Any) -> Any:
        from trickbag.nn import flip_tta

        return lambda x: flip_tta(forward, x, hflip=hflip, vflip=vflip, average=average)

    return wrap


class _CheckShape(Plugin):
    name = "tta"

    def __init__(self, cfg: TTAConfig) -> None:
        self.cfg = cfg

    def configure(self, ctx: TrickContext) -> None:
        if self.cfg.vflip and len(sample_shape(ctx.train_set)) != 3:
            raise RecipeError(
                f"tricks.tta.vflip needs image data [C, H, W]; the training samples have shape "
                f"{list(sample_shape(ctx.train_set))}"
            )


def build(cfg: TTAConfig) -> list[Plugin]:
    return [_CheckShape(cfg), WrapPredict("tta", eval_wrapper(cfg, ()))]


def check(recipe: RecipeView) -> None:
    t = recipe.tricks.tta
    if t.enabled and not (t.hflip or t.vflip):
        raise RecipeError("tricks.tta has no flip turned on; set tricks.tta.hflip=true and/or tricks.tta.vflip=true")


def describe_eval(cfg: TTAConfig) -> str:
    flips = " + ".join(f for f, on in (("hflip", cfg.hflip), ("vflip", cfg.vflip)) if on)
    return f"flip TTA: {flips}, {cfg.average} averaged (tricks.tta)"


TRICK = Trick(
    name="tta",
    config=TTAConfig,
    description="Test-time augmentation: average predictions over flipped inputs at evaluation",
    build=build,
    checks=(check,),
    tasks=("classification",),
    why="its averaging of flipped predictions is defined on class scores",
    eval_wrapper=eval_wrapper,
    describe_eval=describe_eval,
)
