"""Knowledge distillation loss (Hinton, Vinyals & Dean 2015, "Distilling the Knowledge in a Neural Network")."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch  # noqa: F401  (the doctests run in this module's globals)
import torch.nn.functional as F
from torch import Tensor, nn

from trickbag.losses.smoothing import check_logits, check_reduction

__all__ = ["distillation_loss", "DistillationLoss"]

DistillReduction = Literal["batchmean", "sum", "none"]
_DISTILL_REDUCTIONS = ("batchmean", "sum", "none")


def _check_temperature(temperature: object) -> float:
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature <= 0
    ):
        raise ValueError(f"temperature must be a finite float > 0, got {temperature!r}")
    return float(temperature)


def distillation_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    temperature: float = 4.0,
    *,
    reduction: DistillReduction = "batchmean",
) -> Tensor:
    """Soft-target distillation loss ``T^2 * KL(softmax(t / T) || softmax(s / T))``.

    Source: Hinton et al. 2015, section 2.  The KL divergence goes from the
    teacher's distribution ``p`` to the student's ``q``:
    ``sum_c p_c (log p_c - log q_c)``; the ``T^2`` factor keeps the gradient scale
    independent of ``T``, so the loss can be mixed with a hard-label loss.
    ``teacher_logits`` is detached: no gradient flows into the teacher.

    Args:
        student_logits: ``[N, C]``.
        teacher_logits: ``[N, C]``.
        temperature: ``T > 0`` (Hinton et al. use 1 to 20; 4 is a common default).
        reduction: ``"batchmean"`` (sum over classes, mean over ``N``: the true KL per
            sample), ``"sum"``, or ``"none"`` (per-sample ``[N]``).  ``"mean"`` is not
            accepted, because ``F.kl_div``'s ``"mean"`` also divides by ``C``.

    >>> s = torch.tensor([[1.0, 0.0, 0.0]])
    >>> distillation_loss(s, s.clone(), temperature=2.0)
    tensor(0.)
    >>> distillation_loss(s, torch.tensor([[0.0, 0.0, 2.0]]), temperature=1.0)
    tensor(0.7794)
    """
    check_logits(student_logits, "student_logits")
    check_logits(teacher_logits, "teacher_logits")
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student_logits and teacher_logits must have the same shape [N, C], got "
            f"{list(student_logits.shape)} and {list(teacher_logits.shape)}"
        )
    if reduction == "mean":
        raise ValueError(
            "reduction='mean' is ambiguous for a KL divergence (F.kl_div divides by N*C); "
            "use 'batchmean' for the mean over samples, or 'sum' / 'none'"
        )
    check_reduction(reduction, _DISTILL_REDUCTIONS)
    t = _check_temperature(temperature)
    log_q = F.log_softmax(student_logits / t, dim=1)
    log_p = F.log_softmax(teacher_logits.detach() / t, dim=1)
    per_sample = F.kl_div(log_q, log_p, reduction="none", log_target=True).sum(dim=1) * (t * t)
    if reduction == "none":
        return per_sample
    if reduction == "sum":
        return per_sample.sum()
    return per_sample.mean()


class DistillationLoss(nn.Module):
    """``alpha * distillation_loss(s, t, T) + (1 - alpha) * hard_loss(s, target)`` (Hinton et al. 2015).

    The hard loss defaults to ``F.cross_entropy``, which takes int labels ``[N]``
    or probability targets ``[N, C]`` (so it works after mixup/cutmix); any
    ``callable(logits, target) -> scalar`` may be passed instead, e.g. ``FocalLoss()``.
    The distillation term uses ``reduction="batchmean"``.

    Args:
        temperature: ``T > 0``.
        alpha: weight of the distillation term, in ``[0, 1]``.
        hard_loss: loss on the student's logits and the true targets.

    >>> loss_fn = DistillationLoss(temperature=2.0, alpha=0.5)
    >>> s, t = torch.zeros(2, 3), torch.zeros(2, 3)
    >>> loss_fn(s, t, torch.tensor([0, 2]))  # distill term is 0; 0.5 * log(3)
    tensor(0.5493)
    """

    def __init__(
        self,
        temperature: float = 4.0,
        alpha: float = 0.5,
        hard_loss: Callable[[Tensor, Tensor], Tensor] | None = None,
    ) -> None:
        super().__init__()
        self.temperature = _check_temperature(temperature)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be a float in [0, 1] (weight of the distillation term), got {alpha!r}")
        self.alpha = float(alpha)
        if hard_loss is not None and not callable(hard_loss):
            raise TypeError(f"hard_loss must be a callable(logits, target) -> Tensor, got {hard_loss!r}")
        self.hard_loss = F.cross_entropy if hard_loss is None else hard_loss

    def forward(self, student_logits: Tensor, teacher_logits: Tensor, target: Tensor) -> Tensor:
        soft = distillation_loss(student_logits, teacher_logits, self.temperature)
        hard = self.hard_loss(student_logits, target)
        return self.alpha * soft + (1.0 - self.alpha) * hard

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, alpha={self.alpha}"
