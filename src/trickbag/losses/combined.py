"""One classification loss that combines the loss tricks: cross-entropy, focal or a noise-robust loss, class weights,
label smoothing, logit adjustment."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from trickbag.losses.focal import focal_loss
from trickbag.losses.robust import RobustLoss
from trickbag.losses.smoothing import smooth_targets

__all__ = ["ClassificationLoss"]


class ClassificationLoss:
    """Cross-entropy or softmax focal loss with optional class weights and label smoothing, as one callable.

    ``loss_fn(logits, target)`` with logits ``[N, C]`` and int labels ``[N]`` or probabilities
    ``[N, C]`` (e.g. mixup / CutMix targets) returns the mean loss (a scalar):

    * ``gamma is None``: ``F.cross_entropy(logits, target, weight=weight, label_smoothing=smoothing)``;
    * ``gamma`` set: :func:`~trickbag.losses.focal_loss` with ``gamma``, ``alpha``, ``weight`` on
      ``smooth_targets(target, C, smoothing)`` when ``smoothing > 0``, else on ``target``
      (Lin et al. 2017, focal loss, on soft targets);
    * ``robust`` set (a :class:`~trickbag.losses.robust.RobustLoss`: symmetric or generalized cross-entropy
      against noisy labels): that loss with ``weight`` on the (smoothed) targets; it replaces cross-entropy,
      so it cannot be combined with ``gamma``;
    * ``logit_offset`` set (``[C]``, e.g. :func:`~trickbag.losses.logit_adjustment`: Menon et al. 2021's
      ``tau * log(prior)`` for a long-tailed training set): added to the logits before any of the above, inside the
      loss only (predictions use the model's own logits).

    Smoothing is ``q = (1 - eps) * target + eps / C`` (Szegedy et al. 2016), for int and soft targets
    alike.  When the targets were already smoothed (e.g. folded into mixed targets by
    :class:`~trickbag.data.MixupCutmix`), keep ``smoothing=0`` here so it is applied once.
    ``weight`` follows ``F.cross_entropy(weight=)``: with int labels the mean is weighted by
    ``sum_n w_{y_n}``, with probabilities it is the plain mean over ``N``.  The fields are plain
    attributes and may be changed after construction.

    Args:
        num_classes: ``C``.
        smoothing: label smoothing ``eps`` in ``[0, 1)``.
        gamma: focusing parameter of the focal loss, or ``None`` for cross-entropy.
        alpha: focal balancing factor: ``None``, a float (``C == 2``) or a tensor ``[C]``.
        weight: per-class weight ``[C]`` (e.g. :func:`~trickbag.losses.class_balanced_weights`).
        robust: a :class:`~trickbag.losses.robust.RobustLoss` instead of cross-entropy, or ``None``.
        logit_offset: a tensor ``[C]`` added to the logits inside the loss, or ``None``.

    >>> import torch
    >>> loss_fn = ClassificationLoss(3, smoothing=0.1)
    >>> logits, y = torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([0])
    >>> torch.allclose(loss_fn(logits, y), F.cross_entropy(logits, y, label_smoothing=0.1))
    True
    >>> loss_fn.gamma = 0.0  # focal with gamma 0 is cross-entropy
    >>> torch.allclose(loss_fn(logits, y), F.cross_entropy(logits, y, label_smoothing=0.1))
    True
    >>> loss_fn
    ClassificationLoss(focal(gamma=0.0), smoothing=0.1, alpha=None, weight=None)
    """

    def __init__(
        self,
        num_classes: int | None,
        *,
        smoothing: float = 0.0,
        gamma: float | None = None,
        alpha: float | Tensor | None = None,
        weight: Tensor | None = None,
        robust: RobustLoss | None = None,
        logit_offset: Tensor | None = None,
    ) -> None:
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)
                                        or num_classes < 1):
            raise ValueError(f"num_classes must be an int >= 1 (or None: the logits' width), got {num_classes!r}")
        if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)):
            raise TypeError(f"smoothing must be a float in [0, 1), got {smoothing!r}")
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing!r}")
        self.num_classes = num_classes
        self.smoothing = float(smoothing)
        self.gamma = gamma
        self.alpha = alpha
        self.weight = weight
        self.robust = robust
        self.logit_offset = logit_offset

    def __call__(self, logits: Tensor, target: Tensor) -> Tensor:
        if self.logit_offset is not None:
            if self.logit_offset.shape != logits.shape[-1:]:
                raise ValueError(f"logit_offset has shape {tuple(self.logit_offset.shape)}, the logits have "
                                 f"{logits.shape[-1]} classes: it needs one offset per class")
            logits = logits + self.logit_offset
        if self.robust is None and self.gamma is None:
            return F.cross_entropy(logits, target, weight=self.weight, label_smoothing=self.smoothing)
        if self.robust is not None and self.gamma is not None:
            raise ValueError("a focal loss (gamma) and a noise-robust loss (robust) both replace cross-entropy; "
                             "set one of them")
        if self.smoothing > 0:  # cross-entropy smooths itself; focal and the robust losses take smoothed targets
            target = smooth_targets(target, self.num_classes or logits.shape[-1], self.smoothing).to(logits.device)
        if self.gamma is None:
            return self.robust(logits, target, weight=self.weight)  # type: ignore[misc]  # robust is set here
        return focal_loss(logits, target, self.gamma, self.alpha, weight=self.weight)

    def __repr__(self) -> str:
        kind = ("cross_entropy" if self.gamma is None else f"focal(gamma={self.gamma})") if self.robust is None \
            else repr(self.robust)
        return (f"ClassificationLoss({kind}, smoothing={self.smoothing}, "
                f"alpha={'set' if self.alpha is not None else None}, "
                f"weight={'set' if self.weight is not None else None}"
                + (", logit_offset=set)" if self.logit_offset is not None else ")"))
