"""L1 penalty on the trainable weights, added to the loss at LOSS."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from trickbag.config import TrickSection
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.state import State


class L1Config(TrickSection):
    """L1 penalty on the trainable weights added to the loss."""

    weight: float = Field(1e-5, gt=0.0)  # lambda in loss + lambda * sum |w| (sum over all trainable parameters)


class L1Plugin(Plugin):
    """``loss + weight * sum |w|`` over the trainable parameters (:func:`trickbag.losses.l1_penalty`)."""

    name = "l1"

    def __init__(self, weight: float) -> None:
        self.weight = weight

    def on_loss(self, state: State) -> None:
        from trickbag.losses import l1_penalty

        assert state.loss is not None  # the trainer computes it before LOSS
        params = [p for p in state.model.parameters() if p.requires_grad]
        state.loss = state.loss + self.weight * l1_penalty(params)


def build(cfg: L1Config) -> list[Plugin]:
    return [L1Plugin(cfg.weight)]


TRICK = Trick(
    name="l1",
    after=("distillation",),  # the penalty is added to the whole loss, after distillation's blend
    config=L1Config,
    description="L1 penalty: add weight * sum |w| over trainable parameters to the loss",
    build=build,
    unsharded=("its penalty reads the weights outside the forward pass, where FSDP2 holds only this process's "
               "shards; optim.weight_decay shrinks the weights instead"),
)
