"""Load the tensors of a checkpoint that match a model by name and shape, and report the rest."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import Tensor, nn

from trickbag.errors import CheckpointError

__all__ = ["LoadReport", "load_matching", "unwrap"]

# Keys under which training scripts commonly nest the model's state dict.
_NESTING_KEYS = ("model", "state_dict")


def device_of(model: nn.Module) -> torch.device:
    """Where ``model`` lives: the device of its first parameter (or buffer); the CPU for a module with neither.

    >>> device_of(torch.nn.Linear(2, 2))
    device(type='cpu')
    """
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")


def unwrap(model: nn.Module) -> nn.Module:
    """The user's module inside DDP / DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``) wrappers.

    >>> inner = torch.nn.Linear(2, 2)
    >>> unwrap(torch.nn.DataParallel(inner)) is inner
    True
    """
    parallel = (nn.parallel.DistributedDataParallel, nn.DataParallel)
    while True:
        if isinstance(model, parallel):
            model = model.module
        elif isinstance(getattr(model, "_orig_mod", None), nn.Module):
            model = cast(nn.Module, model._orig_mod)
        else:
            return model


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(value.shape) if isinstance(value, Tensor) else None


def _preview(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


@dataclass
class LoadReport:
    """What :func:`load_matching` did: keys are the model's names (after prefix stripping).

    Attributes:
        loaded: keys copied into the model.
        missing: model keys the checkpoint did not provide (left untouched).
        unexpected: checkpoint keys the model does not have (ignored).
        shape_mismatched: ``(key, checkpoint_shape, model_shape)`` for keys present in both
            with different shapes (left untouched).

    >>> r = LoadReport(loaded=["a.weight"], missing=["b.bias"])
    >>> r.ok
    False
    >>> print(r)
    loaded 1 tensor(s); missing 1 (kept as initialised): b.bias
    """

    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    shape_mismatched: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every model key was loaded and every checkpoint key was used."""
        return not (self.missing or self.unexpected or self.shape_mismatched)

    def __str__(self) -> str:
        parts = [f"loaded {len(self.loaded)} tensor(s)"]
        if self.missing:
            parts.append(f"missing {len(self.missing)} (kept as initialised): {_preview(self.missing)}")
        if self.unexpected:
            parts.append(f"unexpected {len(self.unexpected)} (ignored): {_preview(self.unexpected)}")
        if self.shape_mismatched:
            shown = [f"{k} checkpoint {tuple(c)} vs model {tuple(m)}" for k, c, m in self.shape_mismatched]
            parts.append(f"shape mismatched {len(shown)} (kept as initialised): {_preview(shown)}")
        return "; ".join(parts)


def _read_state_dict(source: Any, map_location: Any) -> Mapping[str, Any]:
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"checkpoint file not found: {path!r}")
        try:
            source = torch.load(path, map_location=map_location, weights_only=True)
        except Exception as exc:  # torch raises UnpicklingError/RuntimeError for bad or unsafe files
            raise CheckpointError(
                f"cannot read checkpoint {path!r} with torch.load(weights_only=True): {exc}"
            ) from exc
    if not isinstance(source, Mapping):
        raise TypeError(
            "state_dict_or_path must be a state dict (a Mapping of name -> tensor), a dict holding one "
            f"under 'model' or 'state_dict', or a path to a file; got {type(source).__name__}"
        )
    for key in _NESTING_KEYS:
        nested = source.get(key)
        if isinstance(nested, Mapping):
            return nested
    return source


def _strip(key: str, prefixes: Sequence[str]) -> str:
    stripped = True
    while stripped:
        stripped = False
        for prefix in prefixes:
            if prefix and key.startswith(prefix):
                key = key[len(prefix) :]
                stripped = True
    return key


def load_matching(
    model: nn.Module,
    state_dict_or_path: Mapping[str, Any] | str | os.PathLike,
    *,
    strip_prefixes: Sequence[str] = ("module.", "_orig_mod."),
    strict: bool = False,
    map_location: Any = "cpu",
) -> LoadReport:
    """Copy every checkpoint tensor whose name and shape match the model; report the others.

    The usual fine-tuning load: a pretrained backbone into a model with a new head
    (different number of classes), or a checkpoint saved from a DDP / ``torch.compile``
    model.  Unlike ``model.load_state_dict(strict=False)``, which still raises on a
    shape mismatch, mismatched tensors are skipped and listed.

    - A path is read with ``torch.load(path, map_location=map_location, weights_only=True)``
      (no arbitrary code execution).
    - A dict with a ``"model"`` or ``"state_dict"`` entry that is itself a mapping
      (trickbag and Lightning checkpoints) is unwrapped to that entry.
    - A checkpoint key that is not a model key has ``strip_prefixes`` removed from its
      start, repeatedly (``"module._orig_mod.fc.weight"`` -> ``"fc.weight"``).
    - The model itself is unwrapped from DDP / DataParallel / ``torch.compile``.
    - Values are cast to the model tensor's dtype and device by ``load_state_dict``.

    Args:
        model: the module to load into (modified in place).
        state_dict_or_path: a state dict, a dict nesting one, or a file path.
        strip_prefixes: prefixes removed from checkpoint keys that do not match as they are.
        strict: if True, raise :class:`~trickbag.errors.CheckpointError` (and load nothing)
            unless every key matches by name and shape.
        map_location: passed to ``torch.load`` for paths.

    Returns:
        a :class:`LoadReport`; ``print(report)`` gives a one-line summary.

    >>> src = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 10))
    >>> dst = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 3))
    >>> report = load_matching(dst, {"module." + k: v for k, v in src.state_dict().items()})
    >>> report.loaded
    ['0.weight', '0.bias']
    >>> print(report)
    loaded 2 tensor(s); shape mismatched 2 (kept as initialised):
    1.weight checkpoint (10, 8) vs model (3, 8), 1.bias checkpoint (10,) vs model (3,)
    >>> torch.equal(dst[0].weight, src[0].weight)
    True
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(strip_prefixes, str):
        strip_prefixes = (strip_prefixes,)
    if not all(isinstance(p, str) for p in strip_prefixes):
        raise TypeError(f"strip_prefixes must be a sequence of str, got {strip_prefixes!r}")
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool, got {strict!r}")

    checkpoint = _read_state_dict(state_dict_or_path, map_location)
    model = unwrap(model)
    model_state = model.state_dict()

    report = LoadReport()
    to_load: dict[str, Any] = {}
    for raw_key, value in checkpoint.items():
        if not isinstance(raw_key, str):
            raise TypeError(f"checkpoint keys must be str, got {raw_key!r} ({type(raw_key).__name__})")
        key = raw_key if raw_key in model_state else _strip(raw_key, strip_prefixes)
        if key not in model_state:
            report.unexpected.append(key)
            continue
        ckpt_shape, model_shape = _shape(value), _shape(model_state[key])
        if ckpt_shape is not None and model_shape is not None and ckpt_shape != model_shape:
            report.shape_mismatched.append((key, ckpt_shape, model_shape))
            continue
        to_load[key] = value
    mismatched = {k for k, _, _ in report.shape_mismatched}
    report.loaded = [k for k in model_state if k in to_load]
    report.missing = [k for k in model_state if k not in to_load and k not in mismatched]

    if strict and not report.ok:
        raise CheckpointError(f"checkpoint does not match the model (strict=True, nothing loaded): {report}")
    model.load_state_dict(to_load, strict=False)
    return report
