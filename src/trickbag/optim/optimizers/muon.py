"""``muon``: Muon on the hidden weight matrices and convolution kernels, AdamW on the rest
(:class:`~trickbag.optim.muon.MuonAdamW`).

Which parameters Muon takes is decided on the model (:func:`~trickbag.optim.muon.muon_routing`, plus
``optim.adamw_params``), so the entry has a ``route``. Not on FSDP shards (Muon orthogonalises whole matrices)
and not under SAM (its second pass is unchecked against Muon's updates).
"""

from __future__ import annotations

import functools
from typing import Any

from trickbag.optim.optimizers.base import Factory, Optimizer

NO_FSDP = ("Muon orthogonalises each whole weight matrix, and FSDP2 holds row slices of it (each update would "
           "gather every matrix)")
NO_SAM = "SAM's second pass has not been checked against Muon's orthogonalised updates"


def _spec(o: Any) -> tuple[type, dict[str, Any]]:
    from trickbag.optim.muon import MuonAdamW

    return MuonAdamW, dict(lr=o.lr, weight_decay=o.weight_decay, momentum=o.muon_momentum, betas=o.betas, eps=o.eps)


def _route(o: Any, model: Any, num_outputs: int, kwargs: dict[str, Any], notes: list[str]) -> Factory:
    """The routing of the model's parameters, said once in ``notes``, and the optimizer factory."""
    from trickbag.errors import RecipeError
    from trickbag.nn import unwrap
    from trickbag.optim.muon import MuonAdamW, muon_routing

    net = unwrap(model)
    muon, adamw = muon_routing(net, num_outputs=num_outputs, adamw_patterns=o.adamw_params)
    if not muon:
        raise RecipeError(f"optim.name=muon: model {type(net).__name__} has no hidden weight matrix or convolution "
                          "kernel for Muon (embeddings, the head, biases and norms train with AdamW); "
                          "use optim.name=adamw")
    named = dict(net.named_parameters())
    size = lambda names: sum(named[n].numel() for n in names)  # noqa: E731
    kernels = sum(named[n].ndim > 2 for n in muon)
    notes.append(f"muon: Muon on {len(muon)} hidden matrices ({kernels} of them convolution kernels; "
                 f"{size(muon):,} weights), AdamW on {len(adamw)} other tensors ({size(adamw):,}: embeddings, head, "
                 f"biases, norms"
                 f"{', optim.adamw_params' if o.adamw_params else ''})")
    chosen = [named[n] for n in muon]
    return functools.partial(MuonAdamW, muon_params=chosen, **kwargs)


OPTIMIZERS = (Optimizer(name="muon", spec=_spec, route=_route, no_fsdp=NO_FSDP, no_sam=NO_SAM,
                        keys=("lr", "weight_decay", "muon_momentum", "betas", "eps", "adamw_params")),)
