"""``sgd``: torch's SGD, Nesterov momentum unless ``optim.momentum`` is 0."""

from __future__ import annotations

from typing import Any

from trickbag.optim.optimizers.base import Optimizer, fused


def _spec(o: Any) -> tuple[type, dict[str, Any]]:
    import torch

    return torch.optim.SGD, fused(o, dict(lr=o.lr, momentum=o.momentum, nesterov=o.nesterov and o.momentum > 0,
                                       weight_decay=o.weight_decay))


OPTIMIZERS = (Optimizer(name="sgd", spec=_spec, keys=("lr", "momentum", "nesterov", "weight_decay", "fused")),)
