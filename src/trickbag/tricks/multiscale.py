"""Multi-scale / FixRes training (Touvron et al. 2019): resize training batches, tune and evaluate at the test size.

Training batches are resized at BATCH_START (``F.interpolate``): to ``train_sizes`` (one drawn per
batch when several, reproducibly from ``(train.seed, epoch, batch)``), and to the test size in the
last ``finetune_epochs`` epochs; evaluation (and ``trickbag eval``/``predict``) at the test size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from trickbag.config import TrickSection, needs_items
from trickbag.plugin.context import log
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import GeneratorState, Trick, WrapPredict, image_shape

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.state import State


class MultiscaleConfig(TrickSection):
    """Multi-scale / FixRes training (Touvron et al. 2019): resize training batches, fine-tune at the test size."""

    train_sizes: list[float] = Field(default_factory=list, validate_default=True)  # square training sizes: pixels (>= 4), or fractions of the test size (0 < f <= 1, e.g. 0.785: 176 px at 224); several: one drawn per batch  # noqa: E501 (a key's help is the comment on its line)
    test_size: int | None = Field(None, ge=4)  # evaluation size in pixels; None: the data's own size
    finetune_epochs: int = Field(1, ge=0)  # last epochs trained at the test size (FixRes fine-tuning)
    mode: Literal["bilinear", "bicubic", "nearest", "area"] = "bilinear"  # F.interpolate mode

    @field_validator("train_sizes")
    @classmethod
    def _sizes(cls, v: list[float], info: Any) -> list[float]:
        for s in v:
            if not (0 < s <= 1 or (s >= 4 and float(s).is_integer())):
                raise ValueError(f"{s} is neither a size in pixels (a whole number >= 4) nor a fraction of the test "
                                 "size (0 < f <= 1)")
        return needs_items(v, info, "training size")


def pixel_sizes(sizes: list[float], test_side: int) -> list[int]:
    """Training sizes in pixels: a fraction ``0 < f <= 1`` is ``round(f * test_side)`` (at least 4), else the size.

    >>> pixel_sizes([0.785, 128], 224), pixel_sizes([0.785], 64)
    ([176, 128], [50])
    """
    return [max(4, round(s * test_side)) if s <= 1 else int(s) for s in sizes]


def resize(x: Any, size: tuple[int, int], mode: str) -> Any:
    """``x [N, C, H, W]`` resized to ``size`` (antialiased for the smooth modes); unchanged when it fits."""
    import torch.nn.functional as F

    if tuple(x.shape[-2:]) == tuple(size):
        return x
    smooth = mode in ("bilinear", "bicubic")
    return F.interpolate(x, size=size, mode=mode, align_corners=False if smooth else None, antialias=smooth)


class MultiscalePlugin(GeneratorState, Plugin):
    """Resize training batches at BATCH_START; the test size at evaluation is a :class:`WrapPredict`.

    Sizes are drawn from the trick's own checkpointed generator, as every trick draws (seed, trick name),
    and the same stream on every rank: all ranks train an update at one size, so none waits for another."""

    name = "multiscale"

    def __init__(self, cfg: MultiscaleConfig) -> None:
        self.sizes = list(cfg.train_sizes)  # pixels or fractions of the test size: resolved by configure()
        self.train_sizes = [int(s) for s in self.sizes if s > 1]
        self.test_size, self.mode, self.finetune_epochs = cfg.test_size, cfg.mode, cfg.finetune_epochs
        self.finetune_from = 1
        self.requested = (cfg.finetune_epochs, 1)
        self.native: tuple[int, int] = (0, 0)

    def configure(self, ctx: TrickContext) -> None:
        from trickbag.runtime import trick_generator

        epochs = ctx.epochs
        # a quick `train.epochs=1` try keeps its one epoch at the training sizes
        self.finetune_from = max(1, epochs - self.finetune_epochs) if epochs > 1 else 1
        self.requested = (self.finetune_epochs, epochs)
        self.generator = trick_generator(ctx.seed, "multiscale")  # rank 0's stream on every rank (see above)
        self.native = tuple(image_shape(ctx, "multiscale")[1:])  # type: ignore[assignment]
        ts = self.test or self.native
        self.train_sizes = pixel_sizes(self.sizes, ts[0])
        ft, epochs = self.requested
        tune = f", fine-tune at it from epoch {self.finetune_from + 1}" if self.finetune_from < epochs else ""
        short = f" (finetune_epochs={ft} shortened: the run has {epochs} epochs)" if ft and ft >= epochs else ""
        log.info(f"multiscale: train at {self.train_sizes}, evaluate at {ts[0]}x{ts[1]}{tune}{short}")

    @property
    def test(self) -> tuple[int, int] | None:
        return (self.test_size, self.test_size) if self.test_size else None

    def size_for(self, epoch: int, batch_idx: int) -> tuple[int, int]:
        """Input size of the training batch ``batch_idx`` of ``epoch`` (drawn: call it once per batch)."""
        import torch

        if epoch >= self.finetune_from:
            return self.test or self.native
        if len(self.train_sizes) == 1:
            s = self.train_sizes[0]
        else:
            s = self.train_sizes[int(torch.randint(len(self.train_sizes), (1,), generator=self.generator))]
        return (s, s)

    def on_batch_start(self, state: State) -> None:
        b = state.batch
        state.batch = (resize(b[0], self.size_for(state.epoch, state.batch_idx), self.mode), *b[1:])


def eval_wrapper(cfg: MultiscaleConfig, input_shape: tuple[int, ...]) -> Any | None:
    """Evaluate at ``test_size`` (None when the data's own size is the test size)."""
    if not cfg.test_size:
        return None
    size, mode = (cfg.test_size, cfg.test_size), cfg.mode
    return lambda forward: (lambda x: forward(resize(x, size, mode)))


def build(cfg: MultiscaleConfig) -> list[Plugin]:
    wrap = eval_wrapper(cfg, ())
    return [MultiscalePlugin(cfg)] + (
        [WrapPredict("multiscale", wrap)] if wrap else [])


TRICK = Trick(
    name="multiscale",
    config=MultiscaleConfig,
    description="Multi-scale / FixRes: train on resized batches, fine-tune and evaluate at the test size",
    build=build,
    eval_wrapper=eval_wrapper,
    describe_eval=lambda cfg: f"test size {cfg.test_size}x{cfg.test_size} (tricks.multiscale)" if cfg.test_size else "",
)
