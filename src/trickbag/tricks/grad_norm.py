"""Log the global gradient norm (before clipping) per update and its epoch mean / max."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trickbag.config import TrickSection
from trickbag.plugin.interface import Plugin
from trickbag.tricks.base import Trick

if TYPE_CHECKING:
    from trickbag.plugin.state import State


class GradNormConfig(TrickSection):
    """Log the global gradient norm (before clipping) per update and per epoch."""


class GradNormPlugin(Plugin):
    """``state.grad_norm`` at AFTER_BACKWARD (``train/grad_norm`` in the step rows of metrics.csv) and its
    epoch mean / max (``train/grad_norm``, ``train/grad_norm_max``); skipped updates are left out."""

    name = "grad_norm"

    def __init__(self) -> None:
        self._sum: Any | None = None
        self._max: Any | None = None
        self._n = 0

    def on_epoch_start(self, state: State) -> None:
        self._sum, self._max, self._n = None, None, 0

    def on_after_backward(self, state: State) -> None:
        import torch

        grads = [p.grad for g in state.optimizer.param_groups for p in g["params"] if p.grad is not None]
        state.grad_norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=state.device)

    def on_step(self, state: State) -> None:
        import torch

        if state.step_skipped or state.grad_norm is None:
            return
        norm = state.grad_norm.detach().double()
        self._sum = norm if self._sum is None else self._sum + norm
        self._max = norm if self._max is None else torch.maximum(self._max, norm)
        self._n += 1
        # tensors: the trainer turns them into floats once, at the end of the epoch (no sync per update)
        state.epoch_metrics.update({"train/grad_norm": self._sum / self._n, "train/grad_norm_max": self._max})


def build(cfg: GradNormConfig) -> list[Plugin]:
    return [GradNormPlugin()]


TRICK = Trick(
    name="grad_norm",
    config=GradNormConfig,
    description="Gradient-norm logging: global L2 norm before clipping, per update and per epoch",
    build=build,
)
