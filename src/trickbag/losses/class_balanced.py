"""Class-balanced loss weights from the effective number of samples (Cui et al. 2019)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["class_balanced_weights"]


def class_balanced_weights(
    samples_per_class: Sequence[float] | np.ndarray | Tensor,
    beta: float = 0.9999,
    *,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Per-class weights ``w_c ∝ (1 - beta) / (1 - beta^{n_c})``, normalised so ``sum(w) == C``.

    Source: Cui et al. 2019, "Class-Balanced Loss Based on Effective Number of
    Samples", eq. 6: the effective number of samples is ``(1 - beta^n) / (1 - beta)``
    and the weight is its inverse.  ``beta = 0`` gives all ones (no re-weighting);
    ``beta -> 1`` tends to inverse class frequency.  Computed in float64 with
    ``expm1`` so ``beta`` close to 1 (the paper's 0.9999) loses no precision.

    Pass the result as ``weight=`` (``F.cross_entropy``, :func:`focal_loss`) or ``alpha=``.

    Args:
        samples_per_class: counts ``n_c`` for the ``C`` classes (list, ndarray or tensor ``[C]``);
            every count must be ``> 0`` (a class with no samples has no defined weight:
            drop it from the label space, or pass a count of 1).
        beta: in ``[0, 1)``.
        dtype: floating dtype of the result.

    Returns:
        float tensor ``[C]`` (on the input tensor's device, if a tensor was given).

    >>> class_balanced_weights([100, 10, 1], beta=0.9)
    tensor([0.2393, 0.3674, 2.3932])
    >>> class_balanced_weights([100, 10, 1], beta=0.0)
    tensor([1., 1., 1.])
    """
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0.0 <= beta < 1.0:
        raise ValueError(f"beta must be a float in [0, 1), got {beta!r}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    device = samples_per_class.device if isinstance(samples_per_class, Tensor) else None
    counts = positive_counts(samples_per_class)
    if beta == 0.0:
        weights = np.ones_like(counts)  # beta^n == 0 for n > 0: every effective number is 1
    else:
        # 1 - beta^n = -expm1(n * log(beta)), accurate when beta^n is close to 1.
        weights = (1.0 - beta) / -np.expm1(counts * np.log(beta))
    weights = weights * (counts.size / weights.sum())
    return torch.as_tensor(weights, dtype=dtype, device=device)


def positive_counts(samples_per_class: Sequence[float] | np.ndarray | Tensor) -> np.ndarray:
    """``samples_per_class`` as a float64 array ``[C]`` of finite counts ``> 0``; a ``ValueError`` / ``TypeError``
    naming what is wrong otherwise."""
    if isinstance(samples_per_class, Tensor):
        counts = samples_per_class.detach().to("cpu", torch.float64).numpy()
    else:
        try:
            counts = np.asarray(samples_per_class, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"samples_per_class must be a list, ndarray or tensor of counts, got {samples_per_class!r}"
            ) from exc
    if counts.ndim != 1 or counts.size == 0:
        raise ValueError(f"samples_per_class must be a non-empty 1-D sequence of counts [C], got shape {counts.shape}")
    if not np.all(np.isfinite(counts)):
        raise ValueError(f"samples_per_class must be finite, got {counts.tolist()}")
    bad = np.flatnonzero(counts <= 0)
    if bad.size:
        raise ValueError(
            f"samples_per_class must be > 0 for every class; classes {bad.tolist()} have counts "
            f"{counts[bad].tolist()}. Drop those classes from the label space or give them a count of 1."
        )
    return counts
