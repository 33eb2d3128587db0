"""init_weights: weight statistics against each scheme's formula; norm/bias values; zero-init of residual blocks."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import truncnorm
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

from trickbag.nn import init_weights

FAN_IN, FAN_OUT = 3 * 3 * 32, 3 * 3 * 64  # Conv2d(32, 64, 3): fan = channels * kernel area


def expected_std(scheme: str) -> float:
    return {
        "kaiming_normal": math.sqrt(2 / FAN_IN),
        "kaiming_uniform": math.sqrt(2 / FAN_IN),  # U(-b, b), b = sqrt(6 / fan_in): std = b / sqrt(3)
        "xavier_normal": math.sqrt(2 / (FAN_IN + FAN_OUT)),
        "xavier_uniform": math.sqrt(2 / (FAN_IN + FAN_OUT)),
        "trunc_normal": 0.02 * truncnorm(-2, 2).std(),
    }[scheme]


@pytest.mark.parametrize(
    "scheme", ["kaiming_normal", "kaiming_uniform", "xavier_normal", "xavier_uniform", "trunc_normal"]
)
def test_std_matches_formula(scheme):
    conv = nn.Conv2d(32, 64, 3)  # 18432 weights
    lin = nn.Linear(300, 200)
    init_weights(nn.Sequential(conv, lin), scheme, generator=torch.Generator().manual_seed(0))
    w = conv.weight.detach().double()
    # Relative standard error of a sample std is about 1/sqrt(2n) = 0.5 %; allow 4 %.
    assert w.std().item() == pytest.approx(expected_std(scheme), rel=0.04)
    assert abs(w.mean().item()) < 5 * expected_std(scheme) / math.sqrt(w.numel())  # 5 standard errors
    if scheme.endswith("uniform"):
        assert w.abs().max().item() <= math.sqrt(3) * expected_std(scheme) + 1e-7
    if scheme == "trunc_normal":
        assert w.abs().max().item() <= 0.04 + 1e-7
    if scheme.startswith("kaiming"):
        assert lin.weight.std().item() == pytest.approx(math.sqrt(2 / 300), rel=0.04)
    assert conv.bias.abs().max().item() == 0.0 and lin.bias.abs().max().item() == 0.0


def test_orthogonal_rows_are_orthonormal():
    conv = nn.Conv2d(16, 8, 3)  # flattened to [8, 144]: 8 orthonormal rows
    lin = nn.Linear(8, 20)  # [20, 8]: 8 orthonormal columns
    init_weights(nn.Sequential(conv, lin), "orthogonal", generator=torch.Generator().manual_seed(0))
    w = conv.weight.detach().reshape(8, -1)
    torch.testing.assert_close(w @ w.T, torch.eye(8), atol=1e-5, rtol=0)
    torch.testing.assert_close(lin.weight.T @ lin.weight, torch.eye(8), atol=1e-5, rtol=0)


def test_norm_layers_identity_and_others_untouched():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Embedding(5, 4), nn.Linear(4, 4), nn.LayerNorm(4), nn.BatchNorm1d(4), nn.GroupNorm(2, 4), nn.RMSNorm(4)
    )
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(2.0, 3.0)
    emb = model[0].weight.detach().clone()
    init_weights(model)
    for norm in model[2:]:
        assert torch.equal(norm.weight, torch.ones(4))
        if getattr(norm, "bias", None) is not None:
            assert torch.equal(norm.bias, torch.zeros(4))
    assert torch.equal(model[0].weight, emb)


def test_generator_makes_it_reproducible():
    a, b = nn.Linear(10, 10), nn.Linear(10, 10)
    init_weights(a, "xavier_normal", generator=torch.Generator().manual_seed(3))
    init_weights(b, "xavier_normal", generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.weight, b.weight)


@pytest.mark.parametrize("block, last", [(BasicBlock, "bn2"), (Bottleneck, "bn3")])
def test_zero_init_last_bn_makes_blocks_identity(block, last):
    torch.manual_seed(0)
    width = 8 * block.expansion
    down = nn.Sequential(nn.Conv2d(width, 2 * width, 1, stride=2), nn.BatchNorm2d(2 * width))
    # Small stand-in for a torchvision ResNet stage: a plain block, then a downsampling one.
    model = nn.Sequential(block(width, 8), block(width, 16, stride=2, downsample=down))
    init_weights(model, zero_init_last_bn=True)
    zeroed = {id(getattr(b, last).weight) for b in model}
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(bns) == 2 * (3 if block is Bottleneck else 2) + 1
    for m in bns:
        expected = torch.zeros_like(m.weight) if id(m.weight) in zeroed else torch.ones_like(m.weight)
        assert torch.equal(m.weight, expected)
    # The residual branch now outputs 0: each block computes relu(shortcut(x)).
    model.eval()
    x = torch.randn(2, width, 6, 6)
    for b in model:
        shortcut = b.downsample(x) if b.downsample is not None else x
        torch.testing.assert_close(b(x), torch.relu(shortcut))
        x = b(x)


def test_zero_init_last_bn_on_torchvision_resnet():
    model = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=3)
    init_weights(model, zero_init_last_bn=True)
    for name, m in model.named_modules():
        if isinstance(m, nn.BatchNorm2d):
            assert m.weight.abs().sum().item() == (0.0 if name.endswith("bn2") else m.num_features), name


def test_zero_init_calls_timm_style_hook():
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 1)
            self.bn = nn.BatchNorm2d(2)

        def zero_init_last(self) -> None:
            nn.init.zeros_(self.bn.weight)

    model = nn.Sequential(Block(), Block())
    init_weights(model, zero_init_last_bn=True)
    assert all(torch.equal(b.bn.weight, torch.zeros(2)) for b in model)


def test_zero_init_without_blocks_raises_and_changes_nothing():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="no residual block"):
        init_weights(model, zero_init_last_bn=True)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_invalid_arguments():
    with pytest.raises(ValueError, match="scheme must be one of"):
        init_weights(nn.Linear(2, 2), "he")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lazy"):
        init_weights(nn.LazyLinear(2))
    with pytest.raises(TypeError, match="generator"):
        init_weights(nn.Linear(2, 2), generator=0)  # type: ignore[arg-type]
