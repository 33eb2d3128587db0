"""``lamb``: ``pytorch_optimizer``'s LAMB (You et al. 2020; the ``optimizers`` extra): Adam with a per-layer
trust ratio. Not on FSDP shards: the trust ratio needs each whole parameter's norm."""

from __future__ import annotations

from typing import Any

from trickbag.optim.optimizers.base import Optimizer

NO_FSDP = "LAMB's trust ratio takes each parameter's norm in place, which sharded tensors do not support"


def _spec(o: Any) -> tuple[type, dict[str, Any]]:
    from trickbag._optional import require

    po = require("pytorch_optimizer", extra="optimizers", feature=f"optim.name={o.name}")
    return po.Lamb, dict(lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay)


OPTIMIZERS = (Optimizer(name="lamb", spec=_spec, keys=("lr", "betas", "eps", "weight_decay"), no_fsdp=NO_FSDP),)
