"""Model inspection: parameter counts, torchinfo summaries, intermediate-feature extraction."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

__all__ = ["count_parameters", "summary", "feature_extractor"]


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters of ``model``; a parameter shared by several modules counts once.

    ``trainable_only=True`` counts only parameters with ``requires_grad=True``.  Buffers
    (BatchNorm running statistics) are not parameters and are not counted.

    >>> import torch
    >>> count_parameters(torch.nn.Linear(4, 3))  # 4*3 weights + 3 biases
    15
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(trainable_only, bool):
        raise TypeError(f"trainable_only must be a bool, got {trainable_only!r}")
    total = 0
    for name, p in model.named_parameters():  # deduplicates shared parameters by identity
        if isinstance(p, nn.parameter.UninitializedParameter):
            raise ValueError(f"parameter {name!r} is lazy and not initialised yet: run one forward pass first")
        if p.requires_grad or not trainable_only:
            total += p.numel()
    return total


def summary(model: nn.Module, input_size: Sequence[int] | Sequence[Sequence[int]] | None = None, **kw: Any) -> Any:
    """Layer-by-layer table of ``model`` (output shapes, parameters, mult-adds) from ``torchinfo.summary``.

    Runs one forward pass on random input of shape ``input_size`` (including the
    batch dimension), or on ``input_data=`` passed through ``kw``.  ``verbose=0`` by
    default, so nothing is printed; ``print(result)`` shows the table.  Every other
    keyword (``depth``, ``col_names``, ``device``, ``dtypes``, ...) goes to torchinfo.

    Returns:
        ``torchinfo.ModelStatistics`` (``.total_params``, ``.trainable_params``,
        ``.total_mult_adds``, ``str()`` the table).

    >>> import torch
    >>> stats = summary(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()), (2, 4))
    >>> stats.total_params
    40
    """
    from trickbag._optional import require

    torchinfo = require("torchinfo", extra="app", feature="trickbag.nn.summary")

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if input_size is None and kw.get("input_data") is None:
        raise ValueError("summary needs input_size (e.g. (1, 3, 224, 224), batch dimension included) or input_data=")
    kw.setdefault("verbose", 0)
    return torchinfo.summary(model, input_size=input_size, **kw)


def feature_extractor(model: nn.Module, layers: Sequence[str] | Mapping[str, str]) -> nn.Module:
    """Module returning a dict of intermediate outputs of ``model``, by torch.fx node name.

    A check in front of ``torchvision.models.feature_extraction.create_feature_extractor``:
    ``layers`` is a list of node names (outputs keyed by the same names) or a dict
    ``{node name: output key}``.  Node names come from
    ``torchvision.models.feature_extraction.get_graph_node_names(model)`` (for a module,
    its qualified name, e.g. ``"layer1"`` or ``"layer4.1.relu_1"``); an unknown name raises
    ``ValueError`` listing the valid ones (closest matches first).  The model must be
    traceable by torch.fx (no data-dependent control flow).

    Shapes: the returned module maps the model's input to ``{key: tensor}`` with each
    tensor shaped as that node's output.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten())
    >>> fe = feature_extractor(model, {"1": "relu"})
    >>> fe(torch.zeros(2, 3, 8, 8))["relu"].shape
    torch.Size([2, 4, 6, 6])
    """
    from torchvision.models.feature_extraction import create_feature_extractor, get_graph_node_names

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(layers, Mapping):
        names = list(layers.keys())
        if not all(isinstance(v, str) for v in layers.values()):
            raise TypeError(f"layers values (output keys) must be str, got {list(layers.values())!r}")
        return_nodes: list[str] | dict[str, str] = dict(layers)
    elif isinstance(layers, Sequence) and not isinstance(layers, str):
        names = list(layers)
        return_nodes = names
    else:
        raise TypeError(f"layers must be a list of node names or a dict {{node name: key}}, got {layers!r}")
    if not names:
        raise ValueError("layers is empty: give at least one node name")
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"layers must contain node names (str), got {names!r}")

    train_nodes, eval_nodes = get_graph_node_names(model)
    eval_set = set(eval_nodes)
    valid = [n for n in train_nodes if n in eval_set]  # create_feature_extractor traces both modes
    unknown = [n for n in names if n not in set(valid)]
    if unknown:
        close = [m for n in unknown for m in difflib.get_close_matches(n, valid, n=3)]
        hint = f"closest: {', '.join(dict.fromkeys(close))}; " if close else ""
        raise ValueError(
            f"layers: unknown node name(s) {unknown}; {hint}valid node names are: {', '.join(valid)}"
        )
    return create_feature_extractor(model, return_nodes=return_nodes)
