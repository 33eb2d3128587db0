"""FastSignalCNN (the mnist1d recipe's model) against a forward pass written out with torch.nn.functional."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trickbag.errors import RecipeError
from trickbag.models import FastSignalCNN, build_model


def naive_forward(m: FastSignalCNN, x: torch.Tensor, pool: str) -> torch.Tensor:
    """conv -> BN (running stats) -> ReLU for each layer, 2x max-pool after the first, global pool, linear."""
    convs = [mod for mod in m.modules() if isinstance(mod, torch.nn.Conv1d)]
    bns = [mod for mod in m.modules() if isinstance(mod, torch.nn.BatchNorm1d)]
    h = x
    for i, (conv, bn) in enumerate(zip(convs, bns)):
        h = F.conv1d(h, conv.weight, None, stride=conv.stride, padding=conv.padding)
        h = (h - bn.running_mean[:, None]) / torch.sqrt(bn.running_var[:, None] + bn.eps)
        h = torch.relu(h * bn.weight[:, None] + bn.bias[:, None])
        if i == 0:  # max over non-overlapping pairs, the odd last sample dropped
            n = h.shape[-1] // 2
            h = h[..., : 2 * n].reshape(*h.shape[:-1], n, 2).max(-1).values
    h = h.max(-1).values if pool == "max" else h.mean(-1)
    return h @ m.head.weight.T + m.head.bias


@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("length", [40, 37])
def test_forward_matches_a_functional_reference(pool, length):
    torch.manual_seed(0)
    m = FastSignalCNN(2, 5, width=4, pool=pool)
    with torch.no_grad():  # non-trivial BatchNorm statistics and affine parameters
        for bn in (mod for mod in m.modules() if isinstance(mod, torch.nn.BatchNorm1d)):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    m.eval()
    x = torch.randn(3, 2, length)
    out = m(x)
    assert out.shape == (3, 5)
    torch.testing.assert_close(out, naive_forward(m, x, pool), rtol=1e-5, atol=1e-5)


def test_resolution_and_channels_per_stage():
    m = FastSignalCNN(1, 10, width=8).eval()
    shapes = []
    h = torch.zeros(2, 1, 40)
    for layer in m.features:
        h = layer(h)
        shapes.append(tuple(h.shape[1:]))
    # conv at L, pool to L/2, conv at L/2, strided conv to L/4, 1x1 conv
    assert shapes == [(8, 40), (8, 20), (16, 20), (32, 10), (32, 10)]


def test_builtin_name_and_argument_errors():
    m = build_model("fast_signal_cnn", (1, 40), 10, width=16)
    assert isinstance(m, FastSignalCNN) and m.head.in_features == 64
    with pytest.raises(ValueError, match="pool must be 'max' or 'avg'"):
        FastSignalCNN(pool="sum")
    with pytest.raises(ValueError, match="width must be an int >= 1, got 0"):
        FastSignalCNN(width=0)
    with pytest.raises(RecipeError, match="do not fit model 'fast_signal_cnn'"):
        build_model("fast_signal_cnn", (1, 40), 10, depth=3)
