"""Losses robust to noisy labels: symmetric cross-entropy (SCE) and generalized cross-entropy (GCE).

Cross-entropy's gradient grows without bound on an example the network finds unlikely, so with wrong labels
it learns them by heart once the clean ones are fitted.  Both losses below bound that pull:

* **SCE** (Wang et al. 2019, "Symmetric Cross Entropy for Robust Learning with Noisy Labels"):
  ``alpha * CE + beta * RCE`` with the reverse cross-entropy ``RCE = -sum_c p_c log q_c``, ``log 0`` taken as
  ``log(1e-4)`` as in the paper's code (for a one-hot target ``RCE = -log(1e-4) * (1 - p_y)``, a bounded,
  mean-absolute-error-like term).  Paper: ``alpha = 0.1, beta = 1`` on CIFAR-10.
* **GCE** (Zhang & Sabuncu 2018, "Generalized Cross Entropy Loss for Training Deep Neural Networks with Noisy
  Labels"): ``(1 - p_y^q) / q``, cross-entropy as ``q -> 0`` and mean absolute error at ``q = 1``; paper:
  ``q = 0.7``.

Soft targets ``t`` (mixup / CutMix, label smoothing) are taken linearly, as mixup takes any loss: the loss of
``t`` is ``sum_k t_k`` times the loss of the one-hot target ``k``, i.e. GCE ``sum_c t_c (1 - p_c^q) / q``, CE
``-sum_c t_c log p_c`` and RCE ``-log(1e-4) * sum_c t_c (1 - p_c)`` (the paper's code clamps a soft target
into the logarithm instead, which would make a mixed pair's loss depend on how it was mixed).
``weight`` (per class, ``[C]``) follows ``F.cross_entropy(weight=)``: each sample counts ``w_n = sum_c w_c
t_c`` (``w_{y_n}`` for int labels); ``"mean"`` divides by ``sum_n w_n`` for int labels and by ``N`` for
probabilities.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from trickbag.losses.smoothing import Reduction, check_class_vector, check_logits, check_reduction, check_target

__all__ = ["RobustLoss", "gce_loss", "sce_loss"]

#: the paper's stand-in for ``log 0`` in the reverse cross-entropy: ``log(1e-4)``
RCE_FLOOR = 1e-4


def _targets(logits: Tensor, target: Tensor) -> tuple[Tensor, bool]:
    is_int = check_target(target, logits)
    if is_int:
        return F.one_hot(target.long(), logits.shape[1]).to(logits.dtype), True
    return target.to(logits.dtype), False


def _reduce(per_sample: Tensor, t: Tensor, is_int: bool, weight: Tensor | None, reduction: Reduction) -> Tensor:
    if weight is not None:
        w = t @ weight.to(device=t.device, dtype=t.dtype)  # [N]: w_{y_n}, or sum_c w_c t_c
        per_sample = per_sample * w
    if reduction == "none":
        return per_sample
    if reduction == "sum":
        return per_sample.sum()
    if weight is not None and is_int:
        return per_sample.sum() / w.sum()
    return per_sample.mean()


def _check_positive(name: str, value: object, *, upper: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite float >= 0, got {value!r}")
    if upper is not None and not 0 < value <= upper:
        raise ValueError(f"{name} must lie in (0, {upper}], got {value!r}")
    return float(value)


def gce_loss(logits: Tensor, target: Tensor, q: float = 0.7, *, reduction: Reduction = "mean",
             weight: Tensor | None = None) -> Tensor:
    """Generalized cross-entropy ``(1 - p_y^q) / q`` (Zhang & Sabuncu 2018), ``q`` in ``(0, 1]``.

    Args:
        logits: ``[N, C]``. target: int labels ``[N]`` or probabilities ``[N, C]``.
        q: 0.7 in the paper; toward 0 it becomes cross-entropy, at 1 mean absolute error.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``. weight: per-class ``[C]`` (see the module).

    >>> logits = torch.tensor([[2.0, 0.0, 0.0]])
    >>> p = torch.softmax(logits, 1)[0, 0]
    >>> torch.allclose(gce_loss(logits, torch.tensor([0]), q=0.5), (1 - p.sqrt()) / 0.5)
    True
    """
    check_logits(logits)
    check_reduction(reduction)
    q = _check_positive("q", q, upper=1.0)
    check_class_vector(weight, logits.shape[1], "weight")
    t, is_int = _targets(logits, target)
    log_p = F.log_softmax(logits, dim=1)
    per_class = -torch.expm1(q * log_p) / q  # (1 - p^q) / q, exact near p = 1
    return _reduce((t * per_class).sum(1), t, is_int, weight, reduction)


def sce_loss(logits: Tensor, target: Tensor, alpha: float = 0.1, beta: float = 1.0, *,
             reduction: Reduction = "mean", weight: Tensor | None = None) -> Tensor:
    """Symmetric cross-entropy ``alpha * CE + beta * RCE`` (Wang et al. 2019), ``log 0 := log(1e-4)``.

    Args:
        logits: ``[N, C]``. target: int labels ``[N]`` or probabilities ``[N, C]``.
        alpha: weight of cross-entropy (paper, CIFAR-10: 0.1). beta: weight of reverse cross-entropy (1.0).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``. weight: per-class ``[C]`` (see the module).

    >>> logits, y = torch.tensor([[2.0, 0.0, 0.0]]), torch.tensor([0])
    >>> p_y = torch.softmax(logits, 1)[0, 0]
    >>> ref = 0.1 * F.cross_entropy(logits, y) - math.log(1e-4) * (1 - p_y)
    >>> torch.allclose(sce_loss(logits, y), ref)
    True
    """
    check_logits(logits)
    check_reduction(reduction)
    alpha, beta = _check_positive("alpha", alpha), _check_positive("beta", beta)
    check_class_vector(weight, logits.shape[1], "weight")
    t, is_int = _targets(logits, target)
    log_p = F.log_softmax(logits, dim=1)
    ce = -(t * log_p).sum(1)
    rce = -math.log(RCE_FLOOR) * (t * -torch.expm1(log_p)).sum(1)  # -sum_c p_c log(max(onehot_c, 1e-4)), per k
    return _reduce(alpha * ce + beta * rce, t, is_int, weight, reduction)


@dataclasses.dataclass(frozen=True)
class RobustLoss:
    """A noise-robust classification loss as one callable: ``kind`` ``"sce"`` (``alpha``, ``beta``) or
    ``"gce"`` (``q``); ``loss(logits, target, weight=None)`` is the mean loss.

    >>> logits, y = torch.randn(4, 3), torch.tensor([0, 1, 2, 0])
    >>> torch.allclose(RobustLoss("gce", q=0.7)(logits, y), gce_loss(logits, y, 0.7))
    True
    """

    kind: str = "sce"
    alpha: float = 0.1
    beta: float = 1.0
    q: float = 0.7

    def __post_init__(self) -> None:
        if self.kind not in ("sce", "gce"):
            raise ValueError(f"kind must be 'sce' or 'gce', got {self.kind!r}")

    def __call__(self, logits: Tensor, target: Tensor, weight: Tensor | None = None) -> Tensor:
        if self.kind == "gce":
            return gce_loss(logits, target, self.q, weight=weight)
        return sce_loss(logits, target, self.alpha, self.beta, weight=weight)
