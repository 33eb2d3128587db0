"""Drop path against torchvision's stochastic depth, and on residual models where the output is computed by hand."""

from __future__ import annotations

import copy

import pytest
import torch
import torchvision
from torch import nn
from torchvision.ops import StochasticDepth, stochastic_depth

from trickbag.nn import DropPath, add_drop_path, drop_path
from trickbag.nn.drop_path import depth_rates, residual_blocks


@pytest.mark.parametrize("mode", ["row", "batch"])
@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("shape", [(64, 3), (16, 2, 4, 4), (7, 5, 9)])
def test_drop_path_equals_torchvision_stochastic_depth_on_the_same_stream(mode, p, shape):
    """torchvision draws from the global RNG: seeded like the generator, it must give the very same tensor."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)) + 3.0
    for seed in range(5):
        torch.manual_seed(seed)
        want = stochastic_depth(x, p, mode, training=True)
        got = drop_path(x, p, mode, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(got, want)
    torch.manual_seed(7)
    want = StochasticDepth(p, mode).train()(x)
    assert torch.equal(DropPath(p, mode, generator=torch.Generator().manual_seed(7)).train()(x), want)


def test_drop_path_rows_are_dropped_with_probability_p_and_kept_ones_scaled():
    p, n = 0.3, 20000
    out = drop_path(torch.ones(n, 2), p, generator=torch.Generator().manual_seed(0))
    rows = out[:, 0]
    assert torch.equal(out[:, 0], out[:, 1])
    values = rows.unique().tolist()
    assert len(values) == 2 and values[0] == 0.0 and values[1] == pytest.approx(1 / (1 - p))
    dropped = float((rows == 0).double().mean())
    assert abs(dropped - p) < 4 * (p * (1 - p) / n) ** 0.5
    assert abs(float(rows.double().mean()) - 1.0) < 0.02  # the mean is kept


def test_drop_path_is_the_identity_in_evaluation_and_refuses_bad_arguments():
    x = torch.randn(4, 3)
    assert drop_path(x, 0.5, training=False) is x
    assert torch.equal(DropPath(0.9).eval()(x), x)
    with pytest.raises(ValueError, match=r"p must be a number in \[0, 1\], got 1.5"):
        drop_path(x, 1.5)
    with pytest.raises(ValueError, match="mode must be 'row' or 'batch', got 'sample'"):
        drop_path(x, 0.1, "sample")  # type: ignore[arg-type]


def test_depth_rates_is_timms_linspace():
    for n in (1, 2, 5, 16):
        want = torch.linspace(0, 0.2, n).tolist() if n > 1 else [0.2]
        assert depth_rates(0.2, n) == pytest.approx(want)
    assert depth_rates(0.2, 3, "uniform") == [0.2, 0.2, 0.2]


class Residual(nn.Module):
    """x + W x (no activation after the sum): the branch is out - x."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.f = nn.Linear(d, d, bias=False)

    def forward(self, x):
        return x + self.f(x)


def _toy(seed=0, d=3, depth=3):
    torch.manual_seed(seed)
    return nn.Sequential(*[Residual(d) for _ in range(depth)])


def test_a_named_residual_block_gives_the_hand_computed_output_and_gradients():
    model = _toy()
    ref = copy.deepcopy(model)
    rate, n = 0.5, 8
    hooks = add_drop_path(model, rate, blocks=["Residual"], generator=torch.Generator().manual_seed(4))
    assert hooks.rates == {"0": 0.0, "1": 0.25, "2": 0.5}
    x = torch.randn(n, 3)
    out = model.train()(x)
    # the masks drawn from a copy of the generator, block after block (the first block's rate is 0: no draw)
    g = torch.Generator().manual_seed(4)
    masks = [torch.ones(n, 1)] + [torch.empty(n, 1).bernoulli_(1 - p, generator=g) / (1 - p) for p in (0.25, 0.5)]
    h = x
    for block, m in zip(ref, masks):
        h = h + m * block.f(h)
    assert torch.allclose(out, h, atol=1e-6)
    assert 0 < int((masks[2] == 0).sum()) < n  # this seed drops some samples of the last block, not all
    out.sum().backward()
    h.sum().backward()
    for a, b in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-5)
    # a dropped sample contributes no gradient to the last branch: drop them all and its gradient is zero
    model.zero_grad()
    add_drop_path(model[2:], 1.0, blocks=["Residual"], schedule="uniform")
    model(x).sum().backward()
    assert torch.count_nonzero(model[2].f.weight.grad) == 0 and torch.count_nonzero(model[0].f.weight.grad) > 0
    hooks.remove()
    assert torch.equal(model.eval()(x), ref.eval()(x))


def test_resnet_blocks_drop_their_branch_as_torchvision_stochastic_depth_modules_would():
    """torchvision's ResNet with StochasticDepth after bn2 (drawing from the global RNG) is the reference."""
    torch.manual_seed(0)
    net = torchvision.models.resnet18(num_classes=4)
    ref = copy.deepcopy(net)
    hooks = add_drop_path(net, 0.4, mode="row", generator=torch.Generator().manual_seed(11))
    blocks = [n for n, _ in residual_blocks(ref)]
    assert list(hooks.rates) == blocks and len(blocks) == 8
    for (_, block), p in zip(residual_blocks(ref), torch.linspace(0, 0.4, 8).tolist()):
        block.bn2 = nn.Sequential(block.bn2, StochasticDepth(p, "row"))
    x = torch.randn(6, 3, 32, 32)
    torch.manual_seed(11)
    want = ref.train()(x)
    got = net.train()(x)
    assert torch.equal(got, want)
    keys = net.state_dict().keys()
    assert all(k in keys for k in ("layer1.0.bn2.weight", "layer4.1.bn2.running_mean"))  # keys unchanged
    assert torch.equal(net.eval()(x), ref.eval()(x))  # evaluation: the plain network


def test_copies_of_the_model_are_not_dropped_and_draw_nothing():
    model = _toy()
    g = torch.Generator().manual_seed(0)
    add_drop_path(model, 0.9, blocks=["Residual"], schedule="uniform", generator=g)
    twin = copy.deepcopy(model).train()
    before = g.get_state()
    x = torch.randn(5, 3)
    h = x
    for block in model:
        h = h + block.f(h)
    assert torch.equal(twin(x), h)
    assert torch.equal(g.get_state(), before)


def test_models_without_blocks_and_blocks_that_are_not_residual_are_refused():
    with pytest.raises(ValueError, match=r"Sequential has no residual blocks \(torchvision BasicBlock"):
        add_drop_path(nn.Sequential(nn.Linear(2, 2)), 0.1)
    with pytest.raises(ValueError, match=r"no residual blocks \(class \['Block'\]\)"):
        add_drop_path(_toy(), 0.1, blocks=["Block"])
    model = nn.Sequential(nn.Linear(3, 2))
    add_drop_path(model, 0.5, blocks=["Linear"])
    with pytest.raises(ValueError, match=r"block '0' \(Linear\) returns \[4, 2\] for an input \[4, 3\]"):
        model.train()(torch.randn(4, 3))
