"""Channels-last (NHWC) memory format for the model and 4-D batches (faster convolutions on tensor cores)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trickbag.config import TrickSection
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick, WrapPredict, image_shape

if TYPE_CHECKING:
    from trickbag.plugin.context import TrickContext
    from trickbag.plugin.state import State


class ChannelsLastConfig(TrickSection):
    """Channels-last (NHWC) memory format for the model and 4-D batches (faster convolutions on tensor cores)."""


def _nhwc(x: Any) -> Any:
    import torch

    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


class ChannelsLastPlugin(Plugin):
    """The model in channels-last at build time, every 4-D training batch at BATCH_START."""

    name = "channels_last"

    def configure(self, ctx: TrickContext) -> None:
        import torch

        image_shape(ctx, "channels_last")
        ctx.model = ctx.model.to(memory_format=torch.channels_last)

    def on_batch_start(self, state: State) -> None:
        state.batch = (_nhwc(state.batch[0]), *state.batch[1:])


def build(cfg: ChannelsLastConfig) -> list[Plugin]:
    return [ChannelsLastPlugin(), WrapPredict("channels_last", lambda forward: (lambda x: forward(_nhwc(x))))]


TRICK = Trick(
    name="channels_last",
    config=ChannelsLastConfig,
    description="Channels-last memory format for the model and image batches",
    build=build,
    unsharded="FSDP2 shards contiguous parameters only, and channels-last convolution weights are not",
)
