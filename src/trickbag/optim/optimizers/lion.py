"""``lion``: ``pytorch_optimizer``'s Lion (Chen et al. 2023; the ``optimizers`` extra): the sign of an
interpolated momentum, decoupled weight decay."""

from __future__ import annotations

from typing import Any

from trickbag.optim.optimizers.base import Optimizer


def _spec(o: Any) -> tuple[type, dict[str, Any]]:
    from trickbag._optional import require

    po = require("pytorch_optimizer", extra="optimizers", feature=f"optim.name={o.name}")
    return po.Lion, dict(lr=o.lr, betas=o.betas, weight_decay=o.weight_decay)


OPTIMIZERS = (Optimizer(name="lion", spec=_spec, keys=("lr", "betas", "weight_decay")),)
