"""Optimizer parameter groups: no weight decay on biases/norms, per-pattern LR scales, layer-wise LR decay."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

__all__ = ["layer_id_by_depth", "param_groups"]

# Normalisation layers whose weights (scales) and biases (shifts) get no weight decay.
NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.modules.batchnorm._NormBase,  # BatchNorm*, SyncBatchNorm, InstanceNorm*
    nn.LayerNorm,
    nn.GroupNorm,
    nn.RMSNorm,
    nn.LocalResponseNorm,
)


def _check_number(
    name: str, value: Any, *, low: float = 0.0, low_open: bool = False, high: float | None = None
) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and (high is None or value <= high)
    if not ok:
        left = "(" if low_open else "["
        right = f"{high}]" if high is not None else "inf)"
        interval = f"{left}{low}, {right}"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")
    return float(value)


def _default_layer_ids(model: nn.Module) -> Callable[[str], int]:
    """Layer id = rank of the top-level child owning the parameter, counting only children with parameters.

    Parameters registered directly on ``model`` (e.g. ``cls_token``, ``pos_embed``) get id 0,
    together with the first child.
    """
    ranks: dict[str, int] = {}
    for child_name, child in model.named_children():
        if any(True for _ in child.parameters()):
            ranks[child_name] = len(ranks)

    def layer_id(name: str) -> int:
        head = name.split(".", 1)[0]
        return ranks.get(head, 0) if "." in name else 0

    return layer_id


def param_groups(
    model: nn.Module,
    *,
    lr: float,
    weight_decay: float = 0.0,
    no_decay_bias_norm: bool = True,
    lr_scale: Mapping[str, float] | None = None,
    layer_decay: float | None = None,
    layer_id_fn: Callable[[str], int] | None = None,
) -> list[dict[str, Any]]:
    """Split a model's trainable parameters into optimizer groups with their own ``lr`` and ``weight_decay``.

    The result is passed straight to any ``torch.optim`` optimizer.  Each group has the
    keys ``"params"``, ``"lr"``, ``"weight_decay"``, plus ``"name"`` (for logging) and
    ``"param_names"`` (torch's own optional key, saved in the optimizer's state dict;
    if you later call ``optimizer.add_param_group``, give that group ``"param_names"`` too).

    - Only parameters with ``requires_grad=True`` are included, each exactly once (shared
      parameters once); groups without parameters are not returned.
    - ``no_decay_bias_norm`` (when ``weight_decay > 0``): biases, every parameter with
      ``ndim <= 1`` and every parameter of a normalisation layer (BatchNorm*, InstanceNorm*,
      LayerNorm, GroupNorm, RMSNorm) get ``weight_decay=0`` (Goyal et al. 2017 and
      Loshchilov & Hutter 2019, AdamW: decaying shifts and scales only hurts).
    - ``lr_scale={glob: factor}``: a parameter whose name matches a pattern
      (``fnmatch.fnmatchcase``) has its ``lr`` multiplied by ``factor``; the first matching
      pattern in the mapping's order wins.  A pattern matching no parameter name raises.
    - ``layer_decay`` (layer-wise LR decay, ELECTRA, Clark et al. 2020; BEiT, Bao et al. 2021):
      ``lr *= layer_decay ** (num_layers - layer_id(name))`` with ``num_layers`` the largest
      layer id among the trainable parameters, so the last layer keeps ``lr`` and earlier
      layers get less.  ``layer_id_fn(name) -> int >= 0``; the default numbers the model's
      top-level children that hold parameters in ``named_children()`` order (0, 1, ...);
      parameters registered directly on the model get 0.  For a transformer whose blocks
      sit in one ``ModuleList``, pass a function reading the block index from the name.

    Args:
        model: the module.
        lr: base learning rate (``>= 0``).
        weight_decay: decay for parameters that get it (``>= 0``).
        no_decay_bias_norm: exempt biases, 1-D parameters and norm layers from decay.
        lr_scale: ``{glob pattern: lr factor >= 0}``.
        layer_decay: in ``(0, 1]``, or ``None`` for none.
        layer_id_fn: maps a parameter name to its layer id; only with ``layer_decay``.

    Returns:
        list of group dicts, in order of first appearance in ``named_parameters()``.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
    >>> groups = param_groups(model, lr=0.1, weight_decay=0.05, lr_scale={"2.*": 10.0})
    >>> [(g["name"], g["param_names"], g["lr"], g["weight_decay"]) for g in groups]
    [('decay', ['0.weight'], 0.1, 0.05), ('no_decay', ['0.bias', '1.weight', '1.bias'], 0.1, 0.0),
     ('lr_scale[2.*]/decay', ['2.weight'], 1.0, 0.05), ('lr_scale[2.*]/no_decay', ['2.bias'], 1.0, 0.0)]
    >>> opt = torch.optim.AdamW(groups)
    >>> [round(g["lr"], 4) for g in param_groups(model, lr=1.0, layer_decay=0.5)]
    [0.25, 0.5, 1.0]
    """
    lr, weight_decay, layer_decay = _check_args(model, lr, weight_decay, no_decay_bias_norm, layer_decay, layer_id_fn)
    scales = _scale_patterns(model, lr_scale)
    split_decay = no_decay_bias_norm and weight_decay > 0
    trainable, no_decay_ids = _trainable(model, split_decay)
    layer_ids = _layer_ids(model, trainable, layer_id_fn) if layer_decay is not None else {}
    num_layers = max(layer_ids.values()) if layer_ids else 0
    groups: dict[tuple, dict[str, Any]] = {}
    for name, param in trainable:
        pattern, factor = next(((pat, f) for pat, f in scales if fnmatch.fnmatchcase(name, pat)), (None, 1.0))
        lid = layer_ids.get(name)
        decays = not (
            split_decay
            and (param.ndim <= 1 or name == "bias" or name.endswith(".bias") or id(param) in no_decay_ids)
        )
        key = (lid, pattern, decays)
        if key not in groups:
            parts = ([f"layer{lid}"] if lid is not None else []) + ([f"lr_scale[{pattern}]"] if pattern else [])
            parts += ["decay" if decays else "no_decay"] if split_decay else []
            group_lr = lr * factor * (layer_decay ** (num_layers - lid) if lid is not None else 1.0)  # type: ignore[operator]
            groups[key] = {"params": [], "param_names": [], "lr": group_lr,
                           "weight_decay": weight_decay if decays else 0.0, "name": "/".join(parts) or "all"}
        groups[key]["params"].append(param)
        groups[key]["param_names"].append(name)
    return list(groups.values())


def _check_args(model: nn.Module, lr: Any, weight_decay: Any, no_decay_bias_norm: Any, layer_decay: Any,
                layer_id_fn: Any) -> tuple[float, float, float | None]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    lr = _check_number("lr", lr)
    weight_decay = _check_number("weight_decay", weight_decay)
    if not isinstance(no_decay_bias_norm, bool):
        raise TypeError(f"no_decay_bias_norm must be a bool, got {no_decay_bias_norm!r}")
    if layer_decay is not None:
        layer_decay = _check_number("layer_decay", layer_decay, low_open=True, high=1.0)
    if layer_id_fn is not None:
        if layer_decay is None:
            raise ValueError("layer_id_fn is only used with layer_decay; pass layer_decay=<float in (0, 1]> too")
        if not callable(layer_id_fn):
            raise TypeError(f"layer_id_fn must be a callable name -> int, got {layer_id_fn!r}")
    return lr, weight_decay, layer_decay


def _scale_patterns(model: nn.Module, lr_scale: Mapping[str, float] | None) -> list[tuple[str, float]]:
    """``lr_scale`` checked: each pattern a str matching some parameter name, each factor a number >= 0."""
    scales: list[tuple[str, float]] = []
    if lr_scale is None:
        return scales
    all_names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    if not isinstance(lr_scale, Mapping):
        raise TypeError(f"lr_scale must be a mapping {{glob pattern: factor}}, got {lr_scale!r}")
    for pattern, factor in lr_scale.items():
        if not isinstance(pattern, str):
            raise TypeError(f"lr_scale keys must be glob patterns (str), got {pattern!r}")
        factor = _check_number(f"lr_scale[{pattern!r}]", factor)
        if not any(fnmatch.fnmatchcase(n, pattern) for n in all_names):
            shown = ", ".join(all_names[:8]) + (", ..." if len(all_names) > 8 else "")
            raise ValueError(f"lr_scale pattern {pattern!r} matches no parameter name; names look like: {shown}")
        scales.append((pattern, factor))
    return scales


def _trainable(model: nn.Module, split_decay: bool) -> tuple[list[tuple[str, nn.Parameter]], set[int]]:
    """The trainable parameters in ``named_parameters()`` order, each once, and the ids of norm-layer ones.

    One walk over the module tree (it costs about as much as the grouping itself).
    """
    no_decay_ids: set[int] = set()
    seen: set[int] = set()
    trainable: list[tuple[str, nn.Parameter]] = []
    for prefix, module in model.named_modules():
        is_norm = split_decay and isinstance(module, NORM_TYPES)
        for local, p in module._parameters.items():
            if p is None or id(p) in seen:
                continue
            seen.add(id(p))
            if is_norm:
                no_decay_ids.add(id(p))
            if p.requires_grad:
                trainable.append((f"{prefix}.{local}" if prefix else local, p))
    if not trainable:
        raise ValueError("model has no trainable parameters (every parameter has requires_grad=False)")
    return trainable, no_decay_ids


def _layer_ids(model: nn.Module, trainable: list[tuple[str, nn.Parameter]],
               layer_id_fn: Callable[[str], int] | None) -> dict[str, int]:
    fn = layer_id_fn if layer_id_fn is not None else _default_layer_ids(model)
    layer_ids: dict[str, int] = {}
    for name, _ in trainable:
        lid = fn(name)
        if isinstance(lid, bool) or not isinstance(lid, int) or lid < 0:
            raise ValueError(f"layer_id_fn({name!r}) must return an int >= 0, got {lid!r}")
        layer_ids[name] = lid
    return layer_ids


def layer_id_by_depth(model: nn.Module, depth: int) -> Callable[[str], int]:
    """Layer id of a parameter = rank of its module path cut to ``depth`` names, in parameter order.

    ``depth=1`` numbers the top-level children (``features`` 0, ``head`` 1); ``depth=2`` the
    blocks inside them (``features.0``, ``features.1``, ..., ``head``).  Parameters registered
    on ``model`` itself (``cls_token``) come first in ``named_parameters()`` and so form layer 0
    of their own, the first child then being layer 1; a name that is not in ``model`` gets 0.
    Frozen parameters are counted too, so ids do not change when they are unfrozen.  Pass the
    result as ``layer_id_fn`` to :func:`param_groups` for layer-wise LR decay.

    >>> import torch
    >>> m = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2)),
    ...                         torch.nn.Linear(2, 1))
    >>> f = layer_id_by_depth(m, 2)
    >>> [f(n) for n, _ in m.named_parameters()]
    [0, 0, 1, 1, 2, 2]
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be an int >= 1 (module names per layer), got {depth!r}")
    ranks: dict[str, int] = {}

    def key(name: str) -> str:
        return ".".join(name.split(".")[:-1][:depth])

    for name, _ in model.named_parameters():
        ranks.setdefault(key(name), len(ranks))
    return lambda name: ranks.get(key(name), 0)
