"""Freeze and unfreeze parameters by name pattern, optionally freezing BatchNorm statistics too."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence

from torch import nn

__all__ = ["freeze", "unfreeze"]

# Normalisation layers with running statistics: BatchNorm{1,2,3}d, SyncBatchNorm, and the
# InstanceNorm variants (which only have statistics with track_running_stats=True).
_StatsNorm = nn.modules.batchnorm._NormBase


def _matcher(patterns: str | Sequence[str], regex: bool, arg: str = "patterns") -> tuple[list[str], Callable]:
    """Validate ``patterns`` and return them with a ``match(pattern, name) -> bool`` function."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if not isinstance(patterns, Sequence) or not patterns or not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"{arg} must be a str or a non-empty sequence of str, got {patterns!r}")
    if not isinstance(regex, bool):
        raise TypeError(f"regex must be a bool, got {regex!r}")
    patterns = list(patterns)
    if not regex:
        return patterns, lambda pattern, name: fnmatch.fnmatchcase(name, pattern)
    compiled: dict[str, re.Pattern] = {}
    for p in patterns:
        try:
            compiled[p] = re.compile(p)
        except re.error as exc:
            raise ValueError(f"{arg} contains an invalid regular expression {p!r}: {exc}") from exc
    return patterns, lambda pattern, name: compiled[pattern].fullmatch(name) is not None


def _no_match_error(pattern: str, names: list[str], regex: bool, arg: str = "patterns") -> ValueError:
    kind = "regular expression (re.fullmatch)" if regex else "glob pattern (fnmatch, '*' also matches '.')"
    if not names:
        return ValueError(f"{arg}: {pattern!r} matches nothing: the model has no parameters")
    shown = ", ".join(names[:8]) + (f", ... ({len(names) - 8} more)" if len(names) > 8 else "")
    return ValueError(
        f"{arg}: {kind} {pattern!r} matches no parameter name; parameter names look like: {shown}"
    )


def _select(model: nn.Module, patterns: str | Sequence[str], regex: bool) -> tuple[list[str], Callable[[str], bool]]:
    """Names of the parameters matching any pattern (every pattern must match at least one)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    patterns, match = _matcher(patterns, regex)
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    for pattern in patterns:
        if not any(match(pattern, n) for n in names):
            raise _no_match_error(pattern, names, regex)

    def matches(name: str) -> bool:
        return any(match(p, name) for p in patterns)

    return [n for n in names if matches(n)], matches


class EvalOnlyTrain:
    """Instance override of ``module.train``: the module stays in eval mode whatever ``mode`` is asked.

    Set as an instance attribute, so ``model.train()`` (which calls ``child.train(mode)``
    on every child) leaves the module in eval mode.  A picklable and deep-copyable object,
    unlike a lambda or a bound method.
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self, mode: bool = True) -> nn.Module:
        return nn.Module.train(self.module, False)


def has_frozen_stats(module: nn.Module) -> bool:
    return isinstance(module.__dict__.get("train"), EvalOnlyTrain)


def _module_tensor_names(prefix: str, module: nn.Module) -> list[str]:
    local = [n for n, _ in module.named_parameters(recurse=False)] + [n for n, _ in module.named_buffers(recurse=False)]
    return [f"{prefix}.{n}" if prefix else n for n in local]


def freeze(
    model: nn.Module,
    patterns: str | Sequence[str] = ("*",),
    *,
    freeze_bn_stats: bool = False,
    regex: bool = False,
) -> list[str]:
    """Set ``requires_grad=False`` on the parameters whose names match ``patterns``; return their names.

    Transfer-learning practice (e.g. Yosinski et al. 2014, "How transferable are features
    in deep neural networks?"): train a new head on a frozen backbone, then unfreeze.

    Patterns are matched against the full names of ``model.named_parameters()``
    (``"layer1.0.conv1.weight"``): glob by default (``fnmatch.fnmatchcase``; ``*`` also
    matches dots, so ``"layer1.*"`` is the whole of ``layer1``), or Python regular
    expressions that must match the whole name (``re.fullmatch``) with ``regex=True``.
    A pattern that matches no name raises ``ValueError`` listing some names, so a typo
    does not silently freeze nothing.  Shared parameters match under any of their names.

    ``freeze_bn_stats=True`` also freezes the running statistics of normalisation layers
    with statistics (BatchNorm*, SyncBatchNorm, InstanceNorm*) when every parameter of
    the layer is now frozen and this call matched one of its parameters or buffers (an
    ``affine=False`` layer is selected by its ``running_mean`` / ``running_var`` names):
    the layer is put in eval mode and stays there across ``model.train()`` calls (its
    ``train`` method is overridden on the instance) until :func:`unfreeze` releases it.
    In eval mode BatchNorm normalises with its running statistics and no longer updates
    them, the "frozen BN" used when fine-tuning with small batches.  With the default
    ``False``, frozen BatchNorm layers still update their statistics in train mode.

    Args:
        model: the module (modified in place).
        patterns: one pattern or a sequence of them (default: everything).
        freeze_bn_stats: also freeze normalisation statistics as described above.
        regex: treat patterns as regular expressions.

    Returns:
        names of the matched parameters (now frozen), in ``named_parameters`` order.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
    >>> freeze(model, ["0.*", "1.*"], freeze_bn_stats=True)
    ['0.weight', '0.bias', '1.weight', '1.bias']
    >>> [p.requires_grad for p in model.parameters()]
    [False, False, False, False, True, True]
    >>> model.train()[1].training
    False
    >>> unfreeze(model)
    ['0.weight', '0.bias', '1.weight', '1.bias', '2.weight', '2.bias']
    >>> model.train()[1].training
    True
    """
    if not isinstance(freeze_bn_stats, bool):
        raise TypeError(f"freeze_bn_stats must be a bool, got {freeze_bn_stats!r}")
    names, matches = _select(model, patterns, regex)
    selected = set(names)
    for name, param in model.named_parameters(remove_duplicate=False):
        if name in selected:
            param.requires_grad_(False)
    if freeze_bn_stats:
        for prefix, module in model.named_modules():
            if not isinstance(module, _StatsNorm) or has_frozen_stats(module):
                continue
            if any(p.requires_grad for p in module.parameters(recurse=False)):
                continue
            if any(matches(n) for n in _module_tensor_names(prefix, module)):
                module.train = EvalOnlyTrain(module)  # type: ignore[method-assign, assignment]
                module.train()
    return names


def unfreeze(model: nn.Module, patterns: str | Sequence[str] = ("*",), *, regex: bool = False) -> list[str]:
    """Set ``requires_grad=True`` on the parameters whose names match ``patterns``; return their names.

    The inverse of :func:`freeze`, with the same pattern rules.  Normalisation layers
    whose statistics :func:`freeze` froze are released when any of their parameters or
    buffers matches: they follow ``model.train()`` / ``model.eval()`` again and are set
    to ``model``'s current mode now.

    Args:
        model: the module (modified in place).
        patterns: one pattern or a sequence of them (default: everything).
        regex: treat patterns as regular expressions (``re.fullmatch``).

    Returns:
        names of the matched parameters (now trainable), in ``named_parameters`` order.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Linear(4, 1))
    >>> _ = freeze(model)
    >>> unfreeze(model, "1.*")
    ['1.weight', '1.bias']
    """
    names, matches = _select(model, patterns, regex)
    selected = set(names)
    for name, param in model.named_parameters(remove_duplicate=False):
        if name in selected:
            param.requires_grad_(True)
    for prefix, module in model.named_modules():
        if has_frozen_stats(module) and any(matches(n) for n in _module_tensor_names(prefix, module)):
            del module.train
            module.train(model.training)
    return names
