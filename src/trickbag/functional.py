"""Every pure function of the tricks library in one namespace.

>>> import torch
>>> import trickbag.functional as TF
>>> TF.one_hot(torch.tensor([1]), 3).tolist()
[[0.0, 1.0, 0.0]]
"""

from trickbag.data import cutmix, cutout, mean_std, mixup, one_hot, tsn_indices
from trickbag.losses import (
    class_balanced_weights,
    distillation_loss,
    focal_loss,
    gce_loss,
    gradient_penalty,
    l1_penalty,
    logit_adjustment,
    sce_loss,
    sigmoid_focal_loss,
    smooth_targets,
    soft_target_cross_entropy,
)
from trickbag.nn import (
    count_parameters,
    flip_tta,
    freeze,
    init_weights,
    layer_id_by_depth,
    load_matching,
    param_groups,
    unfreeze,
)
from trickbag.optim import adaptive_clip_gradients, build_scheduler, clip_gradients, scaled_lr

__all__ = [
    "adaptive_clip_gradients",
    "build_scheduler",
    "class_balanced_weights",
    "clip_gradients",
    "count_parameters",
    "cutmix",
    "cutout",
    "distillation_loss",
    "flip_tta",
    "focal_loss",
    "freeze",
    "gce_loss",
    "gradient_penalty",
    "init_weights",
    "l1_penalty",
    "logit_adjustment",
    "layer_id_by_depth",
    "load_matching",
    "mean_std",
    "mixup",
    "one_hot",
    "param_groups",
    "scaled_lr",
    "sce_loss",
    "sigmoid_focal_loss",
    "smooth_targets",
    "soft_target_cross_entropy",
    "tsn_indices",
    "unfreeze",
]
