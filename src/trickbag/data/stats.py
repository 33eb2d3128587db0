"""Exact per-channel mean and standard deviation of a dataset, in one streaming pass."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset

__all__ = ["mean_std"]


def _items(data: Any) -> Iterator[Any]:
    """Yield the elements of a DataLoader / iterable, or of a map-style dataset by index."""
    if isinstance(data, (DataLoader, IterableDataset)) or not (
        hasattr(data, "__len__") and hasattr(data, "__getitem__")
    ):
        if not isinstance(data, Iterable):
            raise TypeError(
                f"mean_std: data must be a Dataset, a DataLoader or an iterable of tensors, got {type(data).__name__}"
            )
        yield from data
    else:
        for i in range(len(data)):
            yield data[i]


def _as_tensor(item: Any, index: int) -> Tensor:
    if isinstance(item, (tuple, list)) and len(item) > 0:
        item = item[0]  # (x, y) samples or [x, y] batches
    if isinstance(item, np.ndarray):
        item = torch.from_numpy(item)
    if not isinstance(item, Tensor):
        raise TypeError(
            f"mean_std: element {index} is a {type(item).__name__}, expected a tensor, an ndarray or an (x, y) pair "
            "with a tensor x; add a transform that converts images to tensors (e.g. v2.ToImage())"
        )
    if item.is_complex() or item.dtype == torch.bool:
        raise TypeError(f"mean_std: element {index} has dtype {item.dtype}; expected a real numeric tensor")
    return item


def mean_std(data: Any, *, channels_dim: int | None = None) -> tuple[Tensor, Tensor]:
    """Exact per-channel mean and population standard deviation over every pixel of a dataset.

    One streaming pass; each element is reduced in float64 to ``(count, mean,
    M2)`` per channel and merged with Chan, Golub & LeVeque's parallel update
    (``δ = m_b - m_a``; ``M2 = M2_a + M2_b + δ²·n_a·n_b / n``), which is stable
    even when the mean is large compared with the spread.  Every pixel weighs
    the same, so images (or batches) of different sizes are handled exactly,
    unlike averaging per-image means.  The std is the population one,
    ``sqrt(M2 / n)`` (``unbiased=False``).  Values are taken as they are:
    ``uint8`` images give statistics in ``[0, 255]``.

    Args:
        data: a map-style ``Dataset`` (or list) whose items are ``x`` or
            ``(x, y)``; an iterable / ``IterableDataset`` of those; or a
            ``DataLoader`` yielding batches ``x`` or ``(x, y, ...)``.  ``x`` is a
            tensor or ndarray with a channel dimension.
        channels_dim: the channel dimension of each element; all other
            dimensions are reduced.  Default: 1 for a ``DataLoader`` (``[N, C, ...]``
            batches), 0 otherwise (``[C, ...]`` samples).

    Returns:
        ``(mean [C], std [C])`` as float64 tensors (``.tolist()`` them for ``v2.Normalize``).

    >>> images = [torch.zeros(2, 1, 1), torch.ones(2, 1, 3)]   # C=2, 1 and 3 pixels
    >>> mean, std = mean_std(images)
    >>> mean.tolist(), std.tolist()   # 3 ones out of 4 pixels, not the mean of means 0.5
    ([0.75, 0.75], [0.4330..., 0.4330...])
    """
    if channels_dim is None:
        channels_dim = 1 if isinstance(data, DataLoader) else 0
    elif isinstance(channels_dim, bool) or not isinstance(channels_dim, int):
        raise TypeError(f"mean_std: channels_dim must be an int or None, got {channels_dim!r}")
    count = 0
    mean: Tensor | None = None
    m2: Tensor | None = None
    for index, item in enumerate(_items(data)):
        x = _as_tensor(item, index)
        if not -x.dim() <= channels_dim < x.dim():
            raise ValueError(
                f"mean_std: channels_dim={channels_dim} is out of range for element {index} of shape {tuple(x.shape)}"
            )
        x = x.detach().to(device="cpu", dtype=torch.float64).movedim(channels_dim, 0)
        x = x.reshape(x.shape[0], -1)
        n_b = x.shape[1]
        if n_b == 0:
            continue
        mean_b = x.mean(dim=1)
        m2_b = ((x - mean_b[:, None]) ** 2).sum(dim=1)
        if mean is None:
            count, mean, m2 = n_b, mean_b, m2_b
            continue
        if mean_b.shape != mean.shape:
            raise ValueError(
                f"mean_std: element {index} has {mean_b.shape[0]} channels along dim {channels_dim}, "
                f"earlier elements had {mean.shape[0]}; check channels_dim"
            )
        n = count + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / n)
        m2 = m2 + m2_b + delta**2 * (count * n_b / n)  # type: ignore[operator]
        count = n
    if mean is None or m2 is None:
        raise ValueError("mean_std: data yielded no pixels; it is empty")
    return mean, torch.sqrt(m2 / count)
