"""Synthetic data: noisy class templates of any shape, made from ``data.split_seed``."""

from __future__ import annotations

from typing import Any

import torch

from trickbag.data.sources.memory import tensor_splits
from trickbag.data.sources.splits import DataSplits
from trickbag.errors import DataError

__all__ = ["fake"]


def fake(cfg: Any) -> DataSplits:
    """Gaussian noise around one random template per class (tests and quick tries)."""
    n = cfg.num_samples or 512
    k = cfg.num_classes or 4
    shape = tuple(cfg.shape or [1, 8, 8])
    if any(int(s) < 1 for s in shape):
        raise DataError(f"data.shape={list(shape)} is not allowed: every size must be >= 1")
    g = torch.Generator().manual_seed(cfg.split_seed)
    templates = torch.randn((k, *shape), generator=g)
    y = torch.arange(n) % k
    x = templates[y] + 1.5 * torch.randn((n, *shape), generator=g)
    splits = tensor_splits(x, y, cfg, augment=None)
    splits.kind = {1: "tabular", 2: "signal"}.get(len(shape), "image")
    return splits
