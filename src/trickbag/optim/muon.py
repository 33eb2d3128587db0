"""Muon on the hidden weight matrices, AdamW on everything else, as one optimizer (:class:`MuonAdamW`).

Muon (Jordan et al. 2024; ``torch.optim.Muon``) orthogonalises the momentum of a 2-D weight matrix with a few
Newton-Schulz steps; it is meant for the hidden matrices only. Embeddings, the output head, biases, norms and
convolution kernels train with AdamW. :func:`muon_routing` makes that split by module type and parameter
name (overridable by name patterns); :class:`MuonAdamW` steps the two torch optimizers as one, so schedules,
gradient scaling, clipping and checkpoints see one optimizer with one ``param_groups`` list.

>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 8), torch.nn.ReLU(),
...                             torch.nn.Linear(8, 3))
>>> muon, adamw = muon_routing(model, num_outputs=3)
>>> muon, adamw
(['1.weight'], ['0.weight', '1.bias', '3.weight', '3.bias'])
>>> opt = MuonAdamW(model.parameters(), lr=0.01, muon_params=[p for n, p in model.named_parameters() if n in muon])
>>> [len(g["params"]) for g in opt.param_groups], [g["kind"] for g in opt.param_groups]
([1, 4], ['muon', 'adamw'])
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__all__ = ["MuonAdamW", "muon_routing"]


def _head_weight(model: torch.nn.Module, num_outputs: int | None) -> str | None:
    """The name of the output head's weight: the last ``nn.Linear`` with ``num_outputs`` outputs."""
    head = None
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and (num_outputs is None or module.out_features == num_outputs):
            head = f"{name}.weight" if name else "weight"
    return head


def muon_routing(model: torch.nn.Module, *, num_outputs: int | None = None,
                 adamw_patterns: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """``(muon, adamw)`` parameter names of ``model`` (trainable ones only): Muon takes the 2-D weights of
    hidden layers; AdamW the embeddings, the output head (the last ``nn.Linear`` with ``num_outputs`` outputs),
    every parameter that is not 2-D (biases, norms, convolution kernels) and names matching ``adamw_patterns``
    (``fnmatch`` patterns such as ``"blocks.0.*"``)."""
    embeddings = {f"{n}.weight" if n else "weight" for n, m in model.named_modules()
                  if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))}
    head = _head_weight(model, num_outputs)
    muon: list[str] = []
    adamw: list[str] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        to_adamw = (p.ndim != 2 or name in embeddings or name == head
                    or any(fnmatch.fnmatchcase(name, pat) for pat in adamw_patterns))
        (adamw if to_adamw else muon).append(name)
    return muon, adamw


class MuonAdamW(torch.optim.Optimizer):
    """``torch.optim.Muon`` on ``muon_params``, ``torch.optim.AdamW`` on the other parameters, stepped as one.

    ``params``: parameters or param groups (their options, e.g. a group's ``lr`` or ``weight_decay``, carry to
    both parts). ``lr`` and ``weight_decay`` are shared; with ``adjust_lr_fn="match_rms_adamw"`` (the default)
    Muon scales its update to AdamW's RMS, so one learning rate suits both (Liu et al. 2025). Each param group
    of :attr:`param_groups` holds one kind (``group["kind"]``: ``"muon"`` or ``"adamw"``); LR schedules see all.
    """

    def __init__(self, params: Iterable[Any], *, muon_params: Iterable[torch.Tensor], lr: float = 1e-3,
                 weight_decay: float = 0.1, momentum: float = 0.95, nesterov: bool = True, ns_steps: int = 5,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 adjust_lr_fn: str | None = "match_rms_adamw") -> None:
        chosen = {id(p) for p in muon_params}
        groups = list(params)
        if groups and isinstance(groups[0], torch.Tensor):
            groups = [{"params": groups}]
        split: dict[str, list[dict[str, Any]]] = {"muon": [], "adamw": []}
        for g in groups:
            opts = {k: v for k, v in g.items() if k != "params"}
            ps = list(g["params"])
            for kind, mine in (("muon", [p for p in ps if id(p) in chosen]),
                               ("adamw", [p for p in ps if id(p) not in chosen])):
                if mine:
                    split[kind].append({**opts, "params": mine, "kind": kind})
        bad = [tuple(p.shape) for g in split["muon"] for p in g["params"] if p.ndim != 2]
        if bad:
            raise ValueError(f"Muon takes 2-D weight matrices only; muon_params has a tensor of shape {bad[0]}")
        super().__init__([*split["muon"], *split["adamw"]], {"lr": lr, "weight_decay": weight_decay})
        self.muon = (torch.optim.Muon(split["muon"], lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn)
                     if split["muon"] else None)
        self.adamw = (torch.optim.AdamW(split["adamw"], lr=lr, weight_decay=weight_decay, betas=betas, eps=eps)
                      if split["adamw"] else None)
        # one list of the very group dicts the two optimizers step: a schedule's change reaches them
        self.param_groups = [*(self.muon.param_groups if self.muon else []),
                             *(self.adamw.param_groups if self.adamw else [])]

    def _parts(self) -> list[torch.optim.Optimizer]:
        return [o for o in (self.muon, self.adamw) if o is not None]

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for opt in self._parts():
            opt.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self._parts():
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"muon": self.muon.state_dict() if self.muon else None,
                "adamw": self.adamw.state_dict() if self.adamw else None}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for name in ("muon", "adamw"):
            opt = getattr(self, name)
            if (opt is None) != (state_dict.get(name) is None):
                raise ValueError(f"the state holds {'no' if opt is not None else 'a'} {name} part, this optimizer "
                                 f"{'has' if opt is not None else 'has no'} one: it was made for another model")
            if opt is not None:
                opt.load_state_dict(state_dict[name])
        self.param_groups = [*(self.muon.param_groups if self.muon else []),
                             *(self.adamw.param_groups if self.adamw else [])]
