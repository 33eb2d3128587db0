"""Shared pieces of the CUDA-only tests: the skip marker, tiny data and models, plug-ins that inject an
fp16 overflow or record what the loop saw, recipe overrides for a short run on the GPU, and comparisons."""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from trickbag.plugin.interface import Plugin

#: every module of tests/gpu: ``pytestmark = CUDA_ONLY``
CUDA_ONLY = [pytest.mark.cuda,
             pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (make test-gpu)")]

ROOT = Path(__file__).resolve().parents[2]

#: a short run of the digits recipe on generated images (4 classes), on the GPU, writing nothing it need not
FAKE = ["data.name=fake", "data.num_samples=256", "data.shape=[3,16,16]", "data.batch_size=16",
        "train.device=cuda", "log.tensorboard=false", "run.progress=false", "run.plots=false",
        "schedule.warmup_epochs=0", "model.kwargs={width: 8}", "optim.lr=0.05"]


def make_data(n: int = 64, shape: Sequence[int] = (3, 8, 8), k: int = 4, seed: int = 0):
    """``n`` random images and labels, on the CPU."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=g), torch.randint(0, k, (n,), generator=g)


def batches(n: int = 64, bs: int = 16, **kw: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """:func:`make_data` cut into a list of CPU batches (an iterable the Trainer accepts as a loader)."""
    x, y = make_data(n, **kw)
    return [(x[i:i + bs], y[i:i + bs]) for i in range(0, n, bs)]


class Net(nn.Module):
    """Convolution + BatchNorm (buffers) + optional dropout (the device's RNG) + linear head."""

    def __init__(self, cin: int = 3, k: int = 4, width: int = 16, dropout: float = 0.0) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout))
        self.head = nn.Linear(width, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def fresh_net(seed: int = 0, **kw: Any) -> Net:
    torch.manual_seed(seed)
    return Net(**kw)


class Hook(Plugin):
    """A plug-in made of the given ``on_<event>`` callables."""

    def __init__(self, **handlers: Callable[[Any], None]) -> None:
        self._events = set(handlers)
        for event, fn in handlers.items():
            setattr(self, "on_" + event, fn)

    def handles(self, event: Any) -> bool:
        return event.value in self._events


class ScaleLossAt(Plugin):
    """Multiplies the loss of micro-batch ``batch_idx`` (every epoch) by ``factor``: with 1e5 the loss stays
    finite but its fp16 backward overflows (a real GradScaler skip); with inf the loss itself is not finite.
    ``closure_only``: only in SAM's second pass."""

    def __init__(self, batch_idx: int, factor: float = 1e5, closure_only: bool = False) -> None:
        self.batch_idx, self.factor, self.closure_only = batch_idx, factor, closure_only

    def on_loss(self, state: Any) -> None:
        if state.batch_idx == self.batch_idx and (state.closure_pass or not self.closure_only):
            state.loss = state.loss * self.factor


class StepLog(Plugin):
    """At every STEP: (step, skipped, lr of group 0, the weights as a flat CPU vector)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, bool, float, torch.Tensor]] = []

    def on_step(self, state: Any) -> None:
        from trickbag.nn import unwrap

        flat = torch.cat([p.detach().float().flatten().cpu() for p in unwrap(state.model).parameters()])
        self.rows.append((state.step, state.step_skipped, state.optimizer.param_groups[0]["lr"], flat))


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's state dict, unwrapped (DDP / compile), copied to the CPU."""
    from trickbag.nn import unwrap

    return {k: v.detach().cpu().clone() for k, v in unwrap(model).state_dict().items()}


def flat(state: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([v.float().flatten() for k, v in state.items() if v.is_floating_point()])


def relative_update_error(start: dict[str, torch.Tensor], got: dict[str, torch.Tensor],
                          ref: dict[str, torch.Tensor]) -> float:
    """``|(got - start) - (ref - start)| / |ref - start|``: how far two trainings from ``start`` went apart,
    relative to how far the reference moved (weights alone would hide a wrong update under their size)."""
    s = flat(start)
    d_ref = flat(ref) - s
    return float((flat(got) - s - d_ref).norm() / d_ref.norm().clamp_min(1e-12))


def assert_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if a[k].dtype != b[k].dtype or not torch.equal(a[k], b[k])]
    assert not different, f"not bit-identical: {different[:5]}"


def cpu_copy(model: nn.Module) -> nn.Module:
    return copy.deepcopy(model).cpu()


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a child ``python -m trickbag``: trickbag from this checkout's src/, one CPU thread."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.update({"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


PYTHON = sys.executable
