"""Softmax multi-class focal loss (Lin et al. 2017, "Focal Loss for Dense Object Detection").

The sigmoid (one-vs-all) form is torchvision's, called unchanged by :func:`sigmoid_focal_loss`
(torchvision is imported at its first call, not with this module).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trickbag.losses.smoothing import Reduction, check_class_vector, check_logits, check_reduction, check_target

__all__ = ["focal_loss", "FocalLoss", "sigmoid_focal_loss"]


def sigmoid_focal_loss(inputs: Tensor, targets: Tensor, alpha: float = 0.25, gamma: float = 2,
                       reduction: str = "none") -> Tensor:
    """:func:`torchvision.ops.sigmoid_focal_loss` (Lin et al. 2017, eq. 5, one sigmoid per output), unchanged.

    torchvision is imported at the first call: importing it costs ~1.5 s (it loads ``torch._dynamo``),
    which every run using :func:`focal_loss` or label smoothing paid when this module imported it.

    Args:
        inputs: logits of any shape; targets: 0/1 (or soft) labels of the same shape.
        alpha: weight of the positives (``1 - alpha`` of the negatives), ``< 0`` for none.
        gamma: focusing parameter. reduction: ``"none"`` (per element), ``"mean"`` or ``"sum"``.

    >>> sigmoid_focal_loss(torch.tensor([3.0, -3.0]), torch.tensor([1.0, 1.0]), alpha=0.25)
    tensor([2.7321e-05, 6.9157e-01])
    """
    from torchvision.ops import sigmoid_focal_loss as torchvision_sigmoid_focal_loss

    return torchvision_sigmoid_focal_loss(inputs, targets, alpha=alpha, gamma=gamma, reduction=reduction)


def _check_gamma(gamma: object) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not math.isfinite(gamma) or gamma < 0:
        raise ValueError(f"gamma must be a finite float >= 0, got {gamma!r}")
    return float(gamma)


def _alpha_vector(alpha: float | Tensor | None, num_classes: int, like: Tensor) -> Tensor | None:
    """Turn ``alpha`` into a per-class ``[C]`` tensor (or None)."""
    if alpha is None:
        return None
    if isinstance(alpha, Tensor):
        check_class_vector(alpha, num_classes, "alpha")
        return alpha.to(device=like.device, dtype=like.dtype)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be None, a float in [0, 1] or a tensor [C], got {type(alpha).__name__}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"a float alpha must lie in [0, 1], got {alpha!r}")
    if num_classes != 2:
        raise ValueError(
            f"a float alpha={alpha!r} is the binary convention (alpha on class 1, 1 - alpha on class 0) and "
            f"needs C == 2 classes, got C == {num_classes}; pass a per-class tensor of shape [{num_classes}] "
            f"instead, e.g. torch.full(({num_classes},), {alpha!r})"
        )
    return torch.tensor([1.0 - alpha, float(alpha)], device=like.device, dtype=like.dtype)


def focal_loss(
    logits: Tensor,
    target: Tensor,
    gamma: float = 2.0,
    alpha: float | Tensor | None = None,
    *,
    reduction: Reduction = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """Softmax focal loss ``l_n = -sum_c w_c alpha_c (1 - p_nc)^gamma q_nc log p_nc``.

    Source: Lin et al. 2017, eq. 5, written for a softmax over ``C`` classes with
    targets ``q`` (one-hot for int labels, any probabilities for soft targets).
    Computed from ``log_softmax`` (and ``1 - p = -expm1(log p)``), so it stays finite
    for saturated logits.  ``gamma=0``, ``alpha=None`` is exactly ``F.cross_entropy``.

    ``alpha`` is the paper's balancing factor, inside the sum, averaged with a plain
    mean: a tensor ``[C]`` of per-class factors, or a float ``a`` for the binary
    convention of ``sigmoid_focal_loss`` (needs ``C == 2``): ``alpha = [1 - a, a]``,
    i.e. ``a`` weights class 1 (the positives).  ``weight`` follows
    ``F.cross_entropy(weight=)`` exactly: for int labels ``"mean"`` divides by
    ``sum_n w_{y_n}``; for probability targets it is the plain mean over ``N``.

    Args:
        logits: ``[N, C]``.
        target: int labels ``[N]`` or probabilities ``[N, C]``.
        gamma: focusing parameter ``>= 0`` (paper: 2).
        alpha: ``None``, float (``C == 2``) or tensor ``[C]``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (per-sample ``[N]``).
        weight: optional per-class weight ``[C]`` with ``F.cross_entropy`` semantics.

    >>> logits = torch.tensor([[3.0, 0.0], [0.0, 3.0]])
    >>> focal_loss(logits, torch.tensor([0, 0]), gamma=2.0, reduction="none")
    tensor([1.0928e-04, 2.7663e+00])
    """
    check_logits(logits)
    check_reduction(reduction)
    gamma = _check_gamma(gamma)
    is_int = check_target(target, logits)
    num_classes = logits.shape[1]
    check_class_vector(weight, num_classes, "weight")
    alpha_vec = _alpha_vector(alpha, num_classes, logits)

    log_p = F.log_softmax(logits, dim=1)
    if is_int:
        idx = target.long().unsqueeze(1)
        log_p = log_p.gather(1, idx)  # [N, 1]: only the true class carries q = 1
    if gamma == 0.0:
        loss = -log_p
    else:
        # 1 - p without cancellation; the clamp keeps d/dx x^gamma (gamma < 1) finite at p == 1.
        one_minus_p = (-torch.expm1(log_p)).clamp_min(torch.finfo(log_p.dtype).tiny)
        loss = -one_minus_p.pow(gamma) * log_p
    class_factor = None
    if alpha_vec is not None:
        class_factor = alpha_vec
    if weight is not None:
        w = weight.to(device=logits.device, dtype=logits.dtype)
        class_factor = w if class_factor is None else class_factor * w
    if is_int:
        if class_factor is not None:
            loss = loss * class_factor[target.long()].unsqueeze(1)
        loss = loss.squeeze(1)
    else:
        q = target if class_factor is None else target * class_factor
        loss = (loss * q).sum(dim=1)

    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if is_int and weight is not None:
        return loss.sum() / weight.to(device=logits.device, dtype=logits.dtype)[target.long()].sum()
    return loss.mean()


class FocalLoss(nn.Module):
    """Module form of :func:`focal_loss`; tensor ``alpha``/``weight`` are buffers (follow ``.to()``).

    >>> loss_fn = FocalLoss(gamma=2.0, alpha=torch.tensor([0.25, 0.5, 0.25]))
    >>> loss_fn(torch.zeros(4, 3), torch.tensor([0, 1, 2, 1]))
    tensor(0.1831)
    """

    weight: Tensor | None

    def __init__(
        self,
        gamma: float = 2.0,
        alpha: float | Tensor | None = None,
        *,
        reduction: Reduction = "mean",
        weight: Tensor | None = None,
    ) -> None:
        super().__init__()
        self.gamma = _check_gamma(gamma)
        check_reduction(reduction)
        self.reduction = reduction
        for name, value in (("alpha", alpha), ("weight", weight)):
            if isinstance(value, Tensor) and value.ndim != 1:
                raise ValueError(f"{name} must be a 1-D per-class tensor [C], got shape {tuple(value.shape)}")
        if isinstance(alpha, Tensor):
            self.register_buffer("alpha", alpha)
        else:
            if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, (int, float))):
                raise TypeError(f"alpha must be None, a float in [0, 1] or a tensor [C], got {type(alpha).__name__}")
            if alpha is not None and not 0.0 <= alpha <= 1.0:
                raise ValueError(f"a float alpha must lie in [0, 1], got {alpha!r}")
            self.alpha = alpha
        if weight is not None and not isinstance(weight, Tensor):
            raise TypeError(f"weight must be a per-class tensor [C] or None, got {type(weight).__name__}")
        self.register_buffer("weight", weight)

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return focal_loss(
            logits, target, self.gamma, self.alpha, reduction=self.reduction, weight=self.weight
        )

    def extra_repr(self) -> str:
        alpha = "tensor" if isinstance(self.alpha, Tensor) else self.alpha
        return f"gamma={self.gamma}, alpha={alpha}, reduction={self.reduction!r}"
