"""Logit adjustment for long-tailed training sets (Menon et al. 2021)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from trickbag.losses.class_balanced import positive_counts

__all__ = ["logit_adjustment"]


def logit_adjustment(
    samples_per_class: Sequence[float] | np.ndarray | Tensor,
    tau: float = 1.0,
    *,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """The offsets ``tau * log(pi_c)`` of the logit-adjusted loss, ``pi_c = n_c / sum(n)`` the training prior.

    Source: Menon et al. 2021, "Long-tail learning via logit adjustment", eq. 10: training on
    ``cross_entropy(logits + tau * log(pi), y)`` makes the model's own (unadjusted) logits estimate the
    *balanced* error's Bayes classifier: a frequent class must win by a margin ``tau * log(pi_y / pi_c)`` over a
    rare one during training, so at test time, where the offsets are left out, rare classes are predicted more
    often.  ``tau = 1`` is the paper's choice (the consistent one); ``tau = 0`` gives zeros (plain cross-entropy).

    Add the result to the logits inside the loss only, never at prediction::

        offsets = logit_adjustment(train_counts).to(device)
        loss = F.cross_entropy(model(x) + offsets, y)

    Computed in float64 (``log`` of each count minus ``log`` of the total).

    Args:
        samples_per_class: training counts ``n_c`` for the ``C`` classes, each ``> 0`` (list, ndarray or tensor).
        tau: temperature ``>= 0``.
        dtype: floating dtype of the result.

    Returns:
        float tensor ``[C]`` (on the input tensor's device, if a tensor was given).

    >>> logit_adjustment([3, 1])
    tensor([-0.2877, -1.3863])
    >>> logit_adjustment([3, 1], tau=0.0)
    tensor([0., 0.])
    """
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not (tau >= 0.0 and np.isfinite(tau)):
        raise ValueError(f"tau must be a finite float >= 0, got {tau!r}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    device = samples_per_class.device if isinstance(samples_per_class, Tensor) else None
    counts = positive_counts(samples_per_class)
    offsets = tau * (np.log(counts) - np.log(counts.sum())) + 0.0  # (+ 0.0: tau 0 gives 0, not -0)
    return torch.as_tensor(offsets, dtype=dtype, device=device)
