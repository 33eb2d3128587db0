"""Debugging helpers: per-module output tracing (shapes, dtypes, first NaN/Inf) and a short profiler run.

* :func:`trace_shapes` runs one forward pass with a forward hook on every module and
  records each output tensor's shape, dtype, device, ``requires_grad`` and whether it
  holds NaN/Inf, flagging the first module (in execution order) whose output is not
  finite.  It is the module-level core of TorchSnooper, without line tracing.
* (torchinfo's layer table is :func:`trickbag.nn.summary`.)
* :func:`profile_steps` runs a training step a few times under :mod:`torch.profiler`,
  returns the top-ops table and writes a Chrome trace.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import torch
from torch import Tensor, nn

__all__ = ["ShapeRecord", "trace_shapes", "format_trace", "ProfileResult", "profile_steps"]


@dataclass(frozen=True)
class ShapeRecord:
    """One output tensor of one module call, as seen by :func:`trace_shapes`.

    ``output`` is the tensor's position inside the module's output: ``""`` when the
    module returned a single tensor, ``"[0]"`` / ``"['logits']"`` / ``"[1][0]"`` for
    tuples, lists and dicts.  ``first_nonfinite`` is True on the records of the first
    module call whose output contains a NaN or an Inf.
    """

    call: int
    name: str
    cls: str
    output: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    has_nan: bool
    has_inf: bool
    first_nonfinite: bool = False

    @property
    def finite(self) -> bool:
        """True when the tensor holds neither NaN nor Inf."""
        return not (self.has_nan or self.has_inf)


def _iter_tensors(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, Tensor]]:
    """Yield ``(path, tensor)`` for every tensor inside nested tuples, lists and dicts."""
    if isinstance(obj, Tensor):
        yield path, obj
    elif depth > 8:  # guard against self-referencing containers
        return
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _iter_tensors(value, f"{path}[{key!r}]", depth + 1)
    elif isinstance(obj, (tuple, list)):
        for i, value in enumerate(obj):
            yield from _iter_tensors(value, f"{path}[{i}]", depth + 1)


def _nonfinite(t: Tensor) -> tuple[bool, bool]:
    if not (t.is_floating_point() or t.is_complex()):
        return False, False
    with torch.no_grad():
        return bool(torch.isnan(t).any()), bool(torch.isinf(t).any())


def format_trace(records: list[ShapeRecord]) -> str:
    """Render :func:`trace_shapes` records as a fixed-width text table.

    >>> rec = ShapeRecord(0, "fc", "Linear", "", (2, 3), torch.float32, torch.device("cpu"), True, False, False)
    >>> print(format_trace([rec]))  # doctest: +NORMALIZE_WHITESPACE
    #  module  class   output  shape   dtype    device  grad  nan  inf
    0  fc      Linear          [2, 3]  float32  cpu     yes   -    -
    """
    header = ("#", "module", "class", "output", "shape", "dtype", "device", "grad", "nan", "inf", "")
    rows = [
        (
            str(r.call),
            r.name,
            r.cls,
            r.output,
            str(list(r.shape)),
            str(r.dtype).removeprefix("torch."),
            str(r.device),
            "yes" if r.requires_grad else "no",
            "NaN" if r.has_nan else "-",
            "Inf" if r.has_inf else "-",
            "<-- first NaN/Inf" if r.first_nonfinite else "",
        )
        for r in records
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


def _call(model: nn.Module, example_input: Any) -> Any:
    if isinstance(example_input, Tensor):
        return model(example_input)
    if isinstance(example_input, tuple):
        return model(*example_input)
    if isinstance(example_input, Mapping):
        return model(**example_input)
    return model(example_input)


def trace_shapes(
    model: nn.Module, example_input: Any, *, file: TextIO | None = None, quiet: bool = False
) -> list[ShapeRecord]:
    """Run one forward pass and record every module's output shape, dtype, device, grad and NaN/Inf flags.

    Source: the module-level part of TorchSnooper (zasdfgbnm/TorchSnooper): a forward
    hook on every module of ``model`` (the root included, named ``"(root)"``) records
    each output tensor in execution order, so children appear before their parent.
    Tuple, list and dict outputs give one record per tensor.  The records of the first
    module call whose output contains NaN or Inf get ``first_nonfinite=True`` -- the
    place where a non-finite value first appears, since later modules only propagate it.

    ``example_input`` is passed as ``model(x)`` for a tensor, ``model(*x)`` for a tuple
    and ``model(**x)`` for a dict.  The pass runs in the model's current mode
    (train/eval) and grad mode; all hooks are removed afterwards, also when the forward
    raises -- in that case the table of the modules that did run is printed before the
    exception propagates.  The table goes to ``file`` (default: ``sys.stdout`` at call
    time); ``quiet=True`` prints nothing.

    >>> model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    >>> recs = trace_shapes(model, torch.zeros(2, 4), quiet=True)
    >>> [(r.name, r.cls, r.shape) for r in recs]
    [('0', 'Linear', (2, 3)), ('1', 'ReLU', (2, 3)), ('(root)', 'Sequential', (2, 3))]
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if file is not None and not hasattr(file, "write"):
        raise TypeError(f"file must be a writable text stream (e.g. sys.stdout) or None, got {type(file).__name__}")
    out = None if quiet else (file if file is not None else sys.stdout)

    records: list[ShapeRecord] = []
    calls = [0]
    first_bad: list[int] = []  # call index of the first non-finite output

    def make_hook(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            call = calls[0]
            calls[0] += 1
            bad = False
            for path, t in _iter_tensors(output):
                has_nan, has_inf = _nonfinite(t)
                bad = bad or has_nan or has_inf
                records.append(
                    ShapeRecord(
                        call=call,
                        name=name,
                        cls=type(module).__name__,
                        output=path,
                        shape=tuple(t.shape),
                        dtype=t.dtype,
                        device=t.device,
                        requires_grad=t.requires_grad,
                        has_nan=has_nan,
                        has_inf=has_inf,
                    )
                )
            if bad and not first_bad:
                first_bad.append(call)

        return hook

    handles = [m.register_forward_hook(make_hook(n or "(root)")) for n, m in model.named_modules()]
    try:
        _call(model, example_input)
    finally:
        for h in handles:
            h.remove()
        if first_bad:
            records[:] = [
                ShapeRecord(**{**r.__dict__, "first_nonfinite": True}) if r.call == first_bad[0] else r for r in records
            ]
        if out is not None:
            print(format_trace(records), file=out)
            if first_bad:
                bad = next(r for r in records if r.first_nonfinite)
                print(f"first NaN/Inf in the output of module {bad.name!r} ({bad.cls})", file=out)
    return records


@dataclass(frozen=True)
class ProfileResult:
    """Outcome of :func:`profile_steps`: the top-ops table and where the Chrome trace was written."""

    table: str
    trace_path: Path | None
    steps: int


def profile_steps(
    step: Callable[[], Any],
    *,
    steps: int = 20,
    warmup: int = 1,
    trace_path: str | os.PathLike[str] | None = None,
    sort_by: str = "self_cpu_time_total",
    row_limit: int = 15,
) -> ProfileResult:
    """Run ``step()`` ``warmup + steps`` times, profiling the last ``steps`` with :mod:`torch.profiler`.

    ``step`` is one full training step (forward, loss, backward, optimizer step).  The
    ``warmup`` calls run unprofiled first, so one-time costs (allocator growth, lazy
    initialisation) do not dominate.  CUDA activity is recorded when CUDA is available.
    Returns torch's ``key_averages().table(sort_by=..., row_limit=...)`` and, when
    ``trace_path`` is given, writes a Chrome trace there (open it in
    ``chrome://tracing`` or https://ui.perfetto.dev).

    >>> w = torch.ones(8, 8, requires_grad=True)
    >>> res = profile_steps(lambda: (w @ w).sum().backward(), steps=2)
    >>> "aten::mm" in res.table
    True
    """
    if not callable(step):
        raise TypeError(f"step must be a callable taking no arguments, got {type(step).__name__}")
    for arg, value, low in (("steps", steps, 1), ("warmup", warmup, 0), ("row_limit", row_limit, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{arg} must be an int >= {low}, got {value!r}")
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    for _ in range(warmup):
        step()
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
    try:
        table = prof.key_averages().table(sort_by=sort_by, row_limit=row_limit)
    except (AttributeError, KeyError) as exc:
        raise ValueError(
            f"sort_by={sort_by!r} is not a profiler column; use e.g. 'self_cpu_time_total', 'cpu_time_total', "
            "'self_cuda_time_total' or 'cpu_memory_usage'"
        ) from exc
    out: Path | None = None
    if trace_path is not None:
        out = Path(trace_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(out))
    return ProfileResult(table=table, trace_path=out, steps=steps)

