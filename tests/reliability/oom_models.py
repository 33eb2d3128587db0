"""Models that run out of memory on purpose, as a GPU would: ``torch.OutOfMemoryError`` in the forward or the
backward of a micro-batch above a size (torch never raises it on the CPU)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class _BackwardOOM(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, gate: OOMAbove) -> torch.Tensor:
        ctx.n, ctx.gate = x.shape[0], gate
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        ctx.gate.check(ctx.n, "backward")
        return grad, None


class OOMAbove(nn.Module):
    """Identity that raises the out-of-memory error on a micro-batch of more than ``limit`` samples, in the
    ``where`` pass, from its ``first``-th such pass of the run on (``first=2``: the first micro-batch fits, the
    second does not); only on the processes in ``ranks`` (None: every one)."""

    def __init__(self, limit: int, where: str = "backward", first: int = 1, ranks: tuple[int, ...] | None = None):
        super().__init__()
        self.limit, self.where, self.first, self.ranks = limit, where, first, ranks
        self.passes = 0
        self.raised: list[int] = []

    def check(self, n: int, where: str) -> None:
        if where != self.where:
            return
        self.passes += 1
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        if n > self.limit and self.passes >= self.first and (self.ranks is None or rank in self.ranks):
            self.raised.append(n)
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {n} MiB (planted: {n} > {self.limit})")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.check(x.shape[0], "forward")
            return _BackwardOOM.apply(x, self)
        return x


def net(limit: int, where: str = "backward", first: int = 1, ranks: tuple[int, ...] | None = None,
        classes: int = 3) -> nn.Sequential:
    """[N, 2, 4] -> BatchNorm, dropout, then the out-of-memory gate and the head."""
    return nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3),
                         OOMAbove(limit, where, first, ranks), nn.Linear(16, classes))
