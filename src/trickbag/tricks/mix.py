"""Mixup / CutMix on every training batch at BATCH_START (Zhang et al. 2018; Yun et al. 2019).

Label smoothing, when on, is folded into the mixed soft targets here (and the loss then does not
smooth again): it is applied exactly once. On multi-label and regression tasks the targets are
mixed with the same weight as the inputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.errors import ConflictError, RecipeError
from trickbag.plugin.context import log, sample_shape
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import GeneratorState, Trick

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.interface import RecipeView
    from trickbag.plugin.state import State


class MixConfig(TrickSection):
    """Mixup and/or CutMix on every training batch (one section: both methods and the switch)."""

    mixup_alpha: float = Field(0.8, ge=0.0)  # Beta(a, a) of the mixup weight; 0 turns mixup off (DeiT: 0.8)
    cutmix_alpha: float = Field(1.0, ge=0.0)  # Beta(a, a) of the CutMix area; 0 turns CutMix off (Yun et al.: 1.0)
    prob: float = Field(1.0, ge=0.0, le=1.0)  # probability that a batch is mixed at all
    switch_prob: float = Field(0.5, ge=0.0, le=1.0)  # probability of CutMix rather than mixup when both are on
    mode: Literal["batch", "pair", "elem"] = "batch"  # one draw per batch, per pair of samples or per sample (timm's modes)  # noqa: E501 (a key's help is the comment on its line)
    off_epoch: int = Field(0, ge=0)  # mix only the first this many epochs, plain batches after (0: every epoch; timm's mixup_off_epoch)  # noqa: E501 (a key's help is the comment on its line)


class _MixArgs(TypedDict):
    """The recipe's keyword arguments of :class:`trickbag.data.MixupCutmix`."""

    mixup_alpha: float
    cutmix_alpha: float
    prob: float
    switch_prob: float


class MixPlugin(GeneratorState, Plugin):
    """:class:`trickbag.data.MixupCutmix` on ``state.batch`` at BATCH_START (soft targets out)."""

    name = "mix"

    def __init__(self, cfg: MixConfig, smoothing: float = 0.0) -> None:
        self.kw = _MixArgs(mixup_alpha=cfg.mixup_alpha, cutmix_alpha=cfg.cutmix_alpha, prob=cfg.prob,
                           switch_prob=cfg.switch_prob)
        self.smoothing = smoothing
        self.off_epoch, self.mode = cfg.off_epoch, cfg.mode
        self.mixer: Any = None
        self.plain: Any = None  # after off_epoch: the same targets (smoothing folded in), inputs unmixed

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.data import MixupCutmix
        from trickbag.runtime import trick_generator

        shape = tuple(sample_shape(ctx.train_set))
        if len(shape) < 2:
            raise RecipeError(
                f"tricks.mix needs samples with a channel dimension ([C, ...]); the data gives shape {list(shape)}"
            )
        if self.kw["cutmix_alpha"] > 0 and len(shape) not in (2, 3):
            raise RecipeError(
                f"tricks.mix.cutmix_alpha={self.kw['cutmix_alpha']} needs images [C, H, W] or signals [C, L]; "
                f"the data gives samples of shape {list(shape)}: set tricks.mix.cutmix_alpha=0 (mixup only)"
            )
        if not ctx.num_outputs:
            raise RecipeError("tricks.mix needs the number of classes and the model's output on a sample did not tell "
                              "(its forward takes other inputs, or returns no logits tensor): pass num_classes= to "
                              "the callback")
        self.rank = ctx.rank
        self.generator = trick_generator(ctx.seed, "mix", self.rank)
        # multi-label and regression targets are float [N, outputs]: mixed as they are
        self.mixer = MixupCutmix(**self.kw, num_classes=ctx.num_outputs, smoothing=self.smoothing,
                                 generator=self.generator)
        if self.off_epoch:
            import torch

            # prob=0 mixes nothing; its own generator, so the trick's stream is not drawn from after off_epoch
            unmixed: _MixArgs = {**self.kw, "prob": 0.0}
            self.plain = MixupCutmix(**unmixed, num_classes=ctx.num_outputs,
                                     smoothing=self.smoothing, generator=torch.Generator(device=self.generator.device))
            if self.off_epoch >= ctx.epochs:
                log.info(f"tricks.mix.off_epoch={self.off_epoch} is not before the run's end "
                                 f"({ctx.epochs} epochs): every epoch is mixed")
        if self.smoothing:
            log.info(f"label smoothing {self.smoothing} is folded into the mixed targets (applied once)")

    def on_batch_start(self, state: State) -> None:
        x, y = state.batch[0], state.batch[1]
        if self.off_epoch and state.epoch >= self.off_epoch:
            xm, ym = self.plain(x, y)
        elif self.mode != "batch":
            from trickbag.data.mix_per_sample import mix_per_sample

            xm, ym = mix_per_sample(x, y, mode=self.mode, **self.kw, num_classes=self.mixer.num_classes,
                                    smoothing=self.smoothing, generator=self.generator)
        else:
            xm, ym = self.mixer(x, y)
        state.batch = (xm, ym, *state.batch[2:])


def build(cfg: MixConfig, label_smoothing: Any) -> list[Plugin]:
    return [MixPlugin(cfg, label_smoothing.eps if label_smoothing.enabled else 0.0)]


def check(recipe: RecipeView) -> None:
    """Something to mix; training accuracy is undefined on mixed targets, so it cannot be monitored."""
    cfg = recipe.tricks.mix
    if not cfg.enabled:
        return
    if cfg.mixup_alpha == 0 and cfg.cutmix_alpha == 0:
        raise RecipeError(
            "tricks.mix is enabled but tricks.mix.mixup_alpha and tricks.mix.cutmix_alpha are both 0; "
            "set one of them > 0 (e.g. mixup_alpha=0.2) or turn tricks.mix off"
        )
    if recipe.train.monitor == "train/acc":
        raise ConflictError(
            "train.monitor=train/acc is never reported with tricks.mix (accuracy is undefined on mixed targets); "
            "monitor val/acc or train/loss"
        )


TRICK = Trick(
    name="mix",
    joins=("label_smoothing",),  # smoothing is folded into the mixed targets (applied once), not into the loss
    after=("cutout", "random_erasing"),  # squares and rectangles are cut out of each image before images are mixed
    config=MixConfig,
    description="Mixup / CutMix per batch, with a switch between them; soft targets (Zhang 2018, Yun 2019)",
    build=build,
    checks=(check,),
)
