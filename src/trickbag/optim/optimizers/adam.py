"""``adamw`` and ``adam``: torch's AdamW (decoupled weight decay) and Adam (L2 added to the gradient)."""

from __future__ import annotations

from typing import Any

from trickbag.optim.optimizers.base import Optimizer, fused

KEYS = ("lr", "betas", "eps", "weight_decay", "fused")


def _adamw(o: Any) -> tuple[type, dict[str, Any]]:
    import torch

    return torch.optim.AdamW, fused(o, dict(lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay))


def _adam(o: Any) -> tuple[type, dict[str, Any]]:
    import torch

    return torch.optim.Adam, fused(o, dict(lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay))


OPTIMIZERS = (Optimizer(name="adamw", spec=_adamw, keys=KEYS), Optimizer(name="adam", spec=_adam, keys=KEYS))
