"""Losses and loss terms: label smoothing, soft-target CE, focal, noise-robust (SCE, GCE),
class-balanced weights, logit adjustment, distillation, penalties.

Each is a plain function on tensors; the stateless module forms
(:class:`SoftTargetCrossEntropy`, :class:`FocalLoss`, :class:`DistillationLoss`)
wrap them for use as ``criterion`` objects, and :class:`ClassificationLoss` combines
cross-entropy or focal loss with class weights and label smoothing in one callable.
"""

from trickbag.losses.class_balanced import class_balanced_weights
from trickbag.losses.combined import ClassificationLoss
from trickbag.losses.distillation import DistillationLoss, distillation_loss
from trickbag.losses.focal import FocalLoss, focal_loss, sigmoid_focal_loss
from trickbag.losses.logit_adjust import logit_adjustment
from trickbag.losses.penalties import gradient_penalty, l1_penalty
from trickbag.losses.robust import RobustLoss, gce_loss, sce_loss
from trickbag.losses.smoothing import SoftTargetCrossEntropy, smooth_targets, soft_target_cross_entropy

__all__ = [
    "ClassificationLoss",
    "DistillationLoss",
    "FocalLoss",
    "RobustLoss",
    "SoftTargetCrossEntropy",
    "class_balanced_weights",
    "distillation_loss",
    "focal_loss",
    "gce_loss",
    "gradient_penalty",
    "l1_penalty",
    "logit_adjustment",
    "sce_loss",
    "sigmoid_focal_loss",
    "smooth_targets",
    "soft_target_cross_entropy",
]
