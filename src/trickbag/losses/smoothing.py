"""Label smoothing targets and cross-entropy against soft (probability) targets.

Label smoothing follows Szegedy et al. 2016, "Rethinking the Inception Architecture
for Computer Vision" (section 7), with the convention of
``F.cross_entropy(label_smoothing=eps)``: ``q = (1 - eps) * onehot + eps / C``.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["smooth_targets", "soft_target_cross_entropy", "SoftTargetCrossEntropy"]

Reduction = Literal["mean", "sum", "none"]
_REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction: object, allowed: tuple[str, ...] = _REDUCTIONS) -> None:
    if reduction not in allowed:
        raise ValueError(f"reduction must be one of {allowed}, got {reduction!r}")


def check_logits(logits: object, name: str = "logits") -> None:
    if not isinstance(logits, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape [N, C], got {type(logits).__name__}")
    if logits.ndim != 2:
        raise ValueError(f"{name} must have shape [N, C], got shape {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {logits.dtype}")


def check_class_vector(value: Tensor | None, num_classes: int, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape [C] or None, got {type(value).__name__}")
    if value.shape != (num_classes,):
        raise ValueError(
            f"{name} must have shape [C] = [{num_classes}] to match the logits, got shape {tuple(value.shape)}"
        )


def check_target(target: object, logits: Tensor) -> bool:
    """Validate an int [N] or probability [N, C] target against logits [N, C]; return True if int."""
    if not isinstance(target, Tensor):
        raise TypeError(
            f"target must be a torch.Tensor (int labels [N] or probabilities [N, C]), got {type(target).__name__}"
        )
    n, c = logits.shape
    if target.is_floating_point():
        if target.shape != (n, c):
            raise ValueError(
                f"probability target must have the logits' shape [N, C] = {[n, c]}, got {list(target.shape)}"
            )
        return False
    if target.dtype == torch.bool or target.is_complex():
        raise TypeError(f"target must be int64 labels or float probabilities, got dtype {target.dtype}")
    if target.shape != (n,):
        raise ValueError(f"int label target must have shape [N] = [{n}], got {list(target.shape)}")
    if n > 0:
        lo, hi = int(target.min()), int(target.max())
        if lo < 0 or hi >= c:
            raise ValueError(f"labels must lie in [0, {c - 1}] for {c} classes, found values in [{lo}, {hi}]")
    return True


def smooth_targets(
    target: Tensor,
    num_classes: int,
    smoothing: float = 0.1,
    *,
    exclude_true: bool = False,
) -> Tensor:
    """Return label-smoothed target probabilities ``q = (1 - eps) * p + eps / C``.

    Source: Szegedy et al. 2016 (Inception-v3, section 7).  The default matches
    ``F.cross_entropy(logits, y, label_smoothing=eps)`` exactly, so
    ``soft_target_cross_entropy(logits, smooth_targets(y, C, eps))`` equals it.

    ``target`` is either int labels ``[N]`` (turned into one-hot ``p``) or
    probabilities ``[N, C]`` (e.g. mixup's mixed targets).  Smoothing is affine,
    so smoothing mixed targets once equals mixing smoothed targets: apply it
    once, never on top of ``label_smoothing=`` in the loss.

    ``exclude_true=True`` gives the variant that keeps ``1 - eps`` on the true
    class and spreads ``eps / (C - 1)`` over the others; for probabilities it is
    ``(1 - eps) * p + eps * (1 - p) / (C - 1)``, which reduces to that on one-hot rows.

    Args:
        target: int labels ``[N]`` (any integer dtype) or float probabilities ``[N, C]``.
        num_classes: ``C``; must equal ``target.shape[1]`` for probabilities.
        smoothing: ``eps`` in ``[0, 1)``.
        exclude_true: use ``eps / (C - 1)`` on the other classes (needs ``C >= 2``).

    Returns:
        ``[N, C]`` probabilities (default float dtype for int labels, else ``target``'s dtype).

    >>> smooth_targets(torch.tensor([0, 2]), num_classes=3, smoothing=0.3)
    tensor([[0.8000, 0.1000, 0.1000],
            [0.1000, 0.1000, 0.8000]])
    >>> smooth_targets(torch.tensor([0]), num_classes=3, smoothing=0.3, exclude_true=True)
    tensor([[0.7000, 0.1500, 0.1500]])
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be a float in [0, 1), got {smoothing!r}")
    if exclude_true and num_classes < 2:
        raise ValueError(f"exclude_true=True needs num_classes >= 2, got num_classes={num_classes}")
    if not isinstance(target, Tensor):
        raise TypeError(
            f"target must be a torch.Tensor (int labels [N] or probabilities [N, C]), got {type(target).__name__}"
        )
    eps = float(smoothing)
    if target.is_floating_point():
        if target.ndim != 2 or target.shape[1] != num_classes:
            raise ValueError(
                f"probability target must have shape [N, num_classes] = [N, {num_classes}], "
                f"got {list(target.shape)}"
            )
        probs = target
    else:
        if target.ndim != 1:
            raise ValueError(f"int label target must have shape [N], got {list(target.shape)}")
        if target.numel() > 0:
            lo, hi = int(target.min()), int(target.max())
            if lo < 0 or hi >= num_classes:
                raise ValueError(
                    f"labels must lie in [0, {num_classes - 1}] for num_classes={num_classes}, "
                    f"found values in [{lo}, {hi}]"
                )
        probs = F.one_hot(target.long(), num_classes).to(torch.get_default_dtype())
    if exclude_true:
        return (1.0 - eps) * probs + (eps / (num_classes - 1)) * (1.0 - probs)
    return (1.0 - eps) * probs + eps / num_classes


def soft_target_cross_entropy(
    logits: Tensor,
    target_probs: Tensor,
    *,
    weight: Tensor | None = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """Cross-entropy against probability targets: ``l_n = -sum_c w_c q_nc log softmax(z_n)_c``.

    Same value as ``F.cross_entropy(logits, target_probs, weight=weight)`` (torch's
    probability-target semantics): with ``weight``, ``"mean"`` is the plain mean over
    the ``N`` samples, *not* the weighted mean used for int labels.  Use it with
    mixup/cutmix targets or :func:`smooth_targets`.

    Args:
        logits: ``[N, C]`` unnormalised scores.
        target_probs: ``[N, C]`` rows of probabilities (each summing to 1).
        weight: optional per-class weight ``[C]``.
        reduction: ``"mean"`` (over N), ``"sum"`` or ``"none"`` (per-sample ``[N]``).

    >>> logits = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
    >>> soft_target_cross_entropy(logits, torch.tensor([[1.0, 0.0], [0.5, 0.5]]), reduction="none")
    tensor([0.1269, 0.6931])
    """
    check_logits(logits)
    check_reduction(reduction)
    if not isinstance(target_probs, Tensor) or not target_probs.is_floating_point():
        got = target_probs.dtype if isinstance(target_probs, Tensor) else type(target_probs).__name__
        raise TypeError(
            f"target_probs must be float probabilities [N, C], got {got}; for int labels use "
            "F.cross_entropy, or convert them with smooth_targets(labels, C, smoothing)"
        )
    if target_probs.shape != logits.shape:
        raise ValueError(
            f"target_probs must have the logits' shape {list(logits.shape)}, got {list(target_probs.shape)}"
        )
    check_class_vector(weight, logits.shape[1], "weight")
    log_p = F.log_softmax(logits, dim=1)
    q = target_probs if weight is None else target_probs * weight
    loss = -(q * log_p).sum(dim=1)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


class SoftTargetCrossEntropy(nn.Module):
    """Module form of :func:`soft_target_cross_entropy` (cross-entropy on ``[N, C]`` probability targets).

    ``weight`` (``[C]``) is stored as a buffer so it follows ``.to(device)``.

    >>> loss_fn = SoftTargetCrossEntropy()
    >>> loss_fn(torch.zeros(2, 4), smooth_targets(torch.tensor([1, 3]), 4, 0.1))
    tensor(1.3863)
    """

    weight: Tensor | None

    def __init__(self, *, weight: Tensor | None = None, reduction: Reduction = "mean") -> None:
        super().__init__()
        check_reduction(reduction)
        if weight is not None and (not isinstance(weight, Tensor) or weight.ndim != 1):
            raise ValueError(f"weight must be a 1-D tensor of per-class weights [C] or None, got {weight!r}")
        self.register_buffer("weight", weight)
        self.reduction = reduction

    def forward(self, logits: Tensor, target_probs: Tensor) -> Tensor:
        return soft_target_cross_entropy(logits, target_probs, weight=self.weight, reduction=self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"
