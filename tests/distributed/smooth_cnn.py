"""``small_cnn``'s layout with smooth parts, for comparing two ways of computing the same training run.

GELU for ReLU and average pooling for max pooling: every update is then a smooth function of the weights, so a
difference in the last bits (a reduction summed in another order) stays that small from update to update. With
ReLU and max pooling it need not: an activation within rounding of zero, or two pooled values within rounding of
each other, takes the other branch in one of the runs and the runs part by far more than rounding (seen on one
CPU: 6e-8 apart after six updates, 1e-3 in a momentum buffer after eight; the same DDP run with its clipping norm
moved by 1e-7 parts from itself by the same amount).
"""

from __future__ import annotations

from torch import nn


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.GELU())


def smooth_cnn(num_classes: int = 10, input_shape: tuple[int, ...] = (1, 8, 8), width: int = 32,
               dropout: float = 0.1) -> nn.Module:
    """Four conv-BatchNorm-GELU blocks (the FSDP units), average pooling, dropout and a linear head."""
    w = width
    features = nn.Sequential(_block(input_shape[0], w), _block(w, 2 * w), nn.AvgPool2d(2), _block(2 * w, 4 * w),
                             _block(4 * w, 4 * w), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return nn.Sequential(features, nn.Dropout(dropout), nn.Linear(4 * w, num_classes))
