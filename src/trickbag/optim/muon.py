"""Muon on the hidden weight matrices and convolution kernels, AdamW on everything else, as one optimizer
(:class:`MuonAdamW`).

Muon (Jordan et al. 2024, github.com/KellerJordan/Muon) orthogonalises the Nesterov momentum of a weight matrix
with five Newton-Schulz steps (:func:`newton_schulz5`); it is meant for hidden layers. A convolution kernel
``[C_out, C_in, *k]`` is trained as the matrix ``p.view(len(p), -1)`` (``[C_out, C_in * prod(k)]``) and the
update is reshaped back, as Keller Jordan's ``muon_update`` and airbench do. Embeddings, the output head, biases,
norms and any other tensor train with AdamW. :func:`muon_routing` makes that split by module type and parameter
name (overridable by name patterns); :class:`MuonAdamW` steps :class:`Muon` and ``torch.optim.AdamW`` as one, so
schedules, gradient scaling, clipping and checkpoints see one optimizer with one ``param_groups`` list.

One learning-rate rule: Muon's step for a ``[A, B]`` matrix view is ``lr * 0.2 * sqrt(max(A, B))`` times the
orthogonalised update, whose RMS is then about AdamW's (Liu et al. 2025, "Muon is scalable for LLM training";
torch's ``adjust_lr_fn="match_rms_adamw"``), so the recipe's one ``optim.lr`` serves both parts.

>>> import torch
>>> model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 8), torch.nn.ReLU(),
...                             torch.nn.Linear(8, 3))
>>> muon, adamw = muon_routing(model, num_outputs=3)
>>> muon, adamw
(['1.weight'], ['0.weight', '1.bias', '3.weight', '3.bias'])
>>> opt = MuonAdamW(model.parameters(), lr=0.01, muon_params=[p for n, p in model.named_parameters() if n in muon])
>>> [len(g["params"]) for g in opt.param_groups], [g["kind"] for g in opt.param_groups]
([1, 4], ['muon', 'adamw'])
>>> cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 8, 3),
...                           torch.nn.Flatten(), torch.nn.LazyLinear(3))
>>> muon_routing(cnn, num_outputs=3)[0]   # every convolution kernel, viewed as [C_out, C_in * k * k]
['0.weight', '2.weight']
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__all__ = ["Muon", "MuonAdamW", "muon_routing", "newton_schulz5", "muon_lr_scale"]

#: Keller Jordan's quintic Newton-Schulz coefficients (github.com/KellerJordan/Muon, muon.py)
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz5(g: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """The orthogonalisation of Muon: ``steps`` quintic Newton-Schulz iterations on a 2-D ``g`` ``[A, B]``,
    in bfloat16, returning a matrix of the same shape whose singular values are near 1 (Jordan et al. 2024).

    >>> o = newton_schulz5(torch.randn(4, 9, generator=torch.Generator().manual_seed(0)))
    >>> o.shape, o.dtype
    (torch.Size([4, 9]), torch.bfloat16)
    >>> bool(((torch.linalg.svdvals(o.float()) - 1).abs() < 0.35).all())
    True
    """
    if g.ndim != 2:
        raise ValueError(f"newton_schulz5 takes a 2-D matrix, got shape {tuple(g.shape)}")
    a, b, c = NS_COEFFICIENTS
    x = g.bfloat16()
    tall = g.size(0) > g.size(1)
    if tall:
        x = x.mT
    x = x / (x.norm() + eps)  # spectral norm at most 1
    for _ in range(steps):
        gram = x @ x.mT
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.mT if tall else x


def muon_lr_scale(shape: torch.Size | Sequence[int]) -> float:
    """The factor Muon's step takes for a parameter of ``shape``: ``0.2 * sqrt(max(A, B))`` of its matrix view
    ``[A, B] = [shape[0], prod(shape[1:])]`` (the RMS of AdamW's update, Liu et al. 2025).

    >>> muon_lr_scale((64, 32, 3, 3))   # a conv kernel: the matrix [64, 288]
    3.394...
    """
    rows, cols = int(shape[0]), math.prod(int(s) for s in shape[1:])
    return 0.2 * math.sqrt(max(rows, cols))


class Muon(torch.optim.Optimizer):
    """Muon on weights of 2 or more dimensions: for each, ``buf <- lerp(buf, grad, 1 - momentum)``; the update
    ``lerp(grad, buf, momentum)`` (Nesterov) or ``buf``, viewed as ``[len(p), -1]``, orthogonalised by
    :func:`newton_schulz5` and reshaped back; ``p <- p * (1 - lr * weight_decay) - lr * muon_lr_scale(p.shape) *
    update``. Keller Jordan's ``muon_update`` with the one LR rule of :func:`muon_lr_scale`.

    Its state per parameter is ``momentum_buffer``, as ``torch.optim.Muon``'s, so its checkpoints load here.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_steps: int = 5) -> None:
        if not lr >= 0.0 or not weight_decay >= 0.0 or not 0.0 <= momentum < 1.0:
            raise ValueError(f"Muon needs lr >= 0, weight_decay >= 0 and 0 <= momentum < 1; got lr={lr}, "
                             f"weight_decay={weight_decay}, momentum={momentum}")
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, int) or ns_steps < 1:
            raise ValueError(f"ns_steps must be an integer >= 1, got {ns_steps!r}")
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "momentum": momentum,
                                  "nesterov": nesterov, "ns_steps": ns_steps})
        bad = [tuple(p.shape) for g in self.param_groups for p in g["params"] if p.ndim < 2]
        if bad:
            raise ValueError(f"Muon takes weights of 2 or more dimensions (matrices, convolution kernels); got a "
                             f"tensor of shape {bad[0]}")

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, wd, beta = group["lr"], group["weight_decay"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Muon does not take sparse gradients")
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad, memory_format=torch.preserve_format)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - beta)
                update = p.grad.lerp(buf, beta) if group["nesterov"] else buf
                update = newton_schulz5(update.reshape(len(update), -1), group["ns_steps"]).view(p.shape)
                p.mul_(1 - lr * wd)
                p.add_(update.to(p.dtype), alpha=-lr * muon_lr_scale(p.shape))
        return loss


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
    hidden layers and every convolution kernel (the weight of an ``nn.Conv*`` / ``nn.ConvTranspose*``, trained as
    ``p.view(len(p), -1)``); AdamW the embeddings, the output head (the last ``nn.Linear`` with ``num_outputs``
    outputs), biases, norms, any other tensor that is not 2-D (a positional embedding, a class token) and the
    names matching ``adamw_patterns`` (``fnmatch`` patterns such as ``"blocks.0.*"``)."""
    embeddings = {f"{n}.weight" if n else "weight" for n, m in model.named_modules()
                  if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))}
    kernels = {f"{n}.weight" if n else "weight" for n, m in model.named_modules()
               if isinstance(m, torch.nn.modules.conv._ConvNd)}
    head = _head_weight(model, num_outputs)
    muon: list[str] = []
    adamw: list[str] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        shaped = p.ndim == 2 or (p.ndim > 2 and name in kernels)
        to_adamw = (not shaped or name in embeddings or name == head
                    or any(fnmatch.fnmatchcase(name, pat) for pat in adamw_patterns))
        (adamw if to_adamw else muon).append(name)
    return muon, adamw


class MuonAdamW(torch.optim.Optimizer):
    """:class:`Muon` on ``muon_params``, ``torch.optim.AdamW`` on the other parameters, stepped as one.

    ``params``: parameters or param groups (their options, e.g. a group's ``lr`` or ``weight_decay``, carry to
    both parts). ``lr`` and ``weight_decay`` are shared: Muon scales its step to AdamW's RMS
    (:func:`muon_lr_scale`), so one learning rate suits both. Each param group of :attr:`param_groups` holds one
    kind (``group["kind"]``: ``"muon"`` or ``"adamw"``); LR schedules see all.
    """

    def __init__(self, params: Iterable[Any], *, muon_params: Iterable[torch.Tensor], lr: float = 1e-3,
                 weight_decay: float = 0.1, momentum: float = 0.95, nesterov: bool = True, ns_steps: int = 5,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
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
        super().__init__([*split["muon"], *split["adamw"]], {"lr": lr, "weight_decay": weight_decay})
        self.muon = (Muon(split["muon"], lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                          ns_steps=ns_steps) if split["muon"] else None)
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
