"""Label encoding: integer class labels to (optionally smoothed) one-hot targets."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["one_hot"]


def check_num_classes(num_classes: object) -> int:
    if isinstance(num_classes, bool) or not isinstance(num_classes, int):
        raise TypeError(f"num_classes must be an int >= 1, got {num_classes!r} ({type(num_classes).__name__})")
    if num_classes < 1:
        raise ValueError(f"num_classes must be an int >= 1, got {num_classes}")
    return num_classes


def check_smoothing(smoothing: object) -> float:
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)):
        raise TypeError(f"smoothing must be a float in [0, 1), got {smoothing!r} ({type(smoothing).__name__})")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be a float in [0, 1), got {smoothing}")
    return float(smoothing)


def one_hot(labels: Tensor, num_classes: int, smoothing: float = 0.0, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """Encode integer class labels as one-hot rows, optionally label-smoothed.

    Label smoothing (Szegedy et al. 2016, "Rethinking the Inception Architecture")
    with the convention ``(1 - ε)·onehot + ε/C``: the true class gets
    ``1 - ε + ε/C`` and every other class ``ε/C``.  This is the target that
    ``F.cross_entropy(logits, labels, label_smoothing=ε)`` uses internally, so
    ``F.cross_entropy(logits, one_hot(labels, C, ε))`` gives the same loss.
    Built on :func:`torch.nn.functional.one_hot`.

    Args:
        labels: integer tensor of any shape ``[*]`` with values in ``[0, num_classes)``.
        num_classes: number of classes ``C``.
        smoothing: ``ε`` in ``[0, 1)``; ``0`` gives a plain one-hot encoding.
        dtype: output dtype; must be floating point when ``smoothing > 0``.

    Returns:
        Tensor ``[*, C]`` of ``dtype`` on the device of ``labels``; each row sums to 1.

    >>> one_hot(torch.tensor([0, 2]), 3)
    tensor([[1., 0., 0.],
            [0., 0., 1.]])
    >>> one_hot(torch.tensor([1]), 4, smoothing=0.2)
    tensor([[0.0500, 0.8500, 0.0500, 0.0500]])
    """
    if not isinstance(labels, Tensor):
        raise TypeError(f"labels must be an integer torch.Tensor, got {type(labels).__name__}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(
            f"labels must be an integer tensor of class indices, got dtype {labels.dtype}; "
            "pass soft targets to mixup/cutmix directly instead of one_hot"
        )
    num_classes = check_num_classes(num_classes)
    smoothing = check_smoothing(smoothing)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    if smoothing > 0 and not dtype.is_floating_point:
        raise ValueError(f"smoothing={smoothing} needs a floating-point dtype, got dtype={dtype}")
    if labels.numel() > 0:
        lo, hi = int(labels.min()), int(labels.max())
        if lo < 0 or hi >= num_classes:
            bad = lo if lo < 0 else hi
            raise ValueError(f"labels must be in [0, num_classes={num_classes}), found label {bad}")
    out = F.one_hot(labels.long(), num_classes).to(dtype)
    if smoothing > 0:
        out = out * (1.0 - smoothing) + smoothing / num_classes
    return out
