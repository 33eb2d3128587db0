"""``rmsprop``: torch's RMSprop."""

from __future__ import annotations

from typing import Any

from trickbag.optim.optimizers.base import Optimizer


def _spec(o: Any) -> tuple[type, dict[str, Any]]:
    import torch

    return torch.optim.RMSprop, dict(lr=o.lr, momentum=o.momentum, eps=o.eps, weight_decay=o.weight_decay)


OPTIMIZERS = (Optimizer(name="rmsprop", spec=_spec, keys=("lr", "momentum", "eps", "weight_decay")),)
