"""checkpoint_blocks: the same gradients and the same trained model (buffers included) as the model without it,
checked against a copy of the model trained without checkpointing; less memory kept for backward; its refusals."""

from __future__ import annotations

import copy
import io

import pytest
import torch
import torchvision
from torch import nn

from tests.nn.helpers import round_trip
from trickbag.models import MLP, FastSignalCNN, SmallCNN
from trickbag.nn import DropPath, add_drop_path, checkpoint_blocks, find_blocks, uncheckpoint_blocks


class Residual(nn.Module):
    """A residual block with BatchNorm, Dropout and in-place ReLUs; counts its forward calls (per class)."""

    calls = 0

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c, momentum=None)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        h = torch.relu_(self.bn1(self.conv1(x)))
        return torch.relu_(x + self.drop(self.bn2(self.conv2(h))))


def make_net(seed: int = 0) -> nn.Module:
    """Stem, four residual blocks (one BatchNorm with a cumulative average), a pooled Dropout head."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
        nn.Sequential(*[Residual(4) for _ in range(4)]),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.3), nn.Linear(4, 3),
    )


def batches(n: int, shape: tuple[int, ...] = (3, 8, 8), classes: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, *shape, generator=g), torch.randint(0, classes, (8,), generator=g)) for _ in range(n)]


def train(model: nn.Module, data: list[tuple[torch.Tensor, torch.Tensor]]) -> list[list[torch.Tensor]]:
    """SGD with momentum over ``data``, dropout from the global RNG seeded per step; the gradients of each step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    grads = []
    model.train()
    for step, (x, y) in enumerate(data):
        torch.manual_seed(100 + step)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        opt.step()
    return grads


def assert_same_training(plain: nn.Module, checkpointed: nn.Module, data: list) -> None:
    """The same gradients (to 1e-6) at every step, then bit-identical parameters and buffers."""
    grads_ref, grads = train(plain, data), train(checkpointed, data)
    for step_ref, step in zip(grads_ref, grads, strict=True):
        for g_ref, g in zip(step_ref, step, strict=True):
            torch.testing.assert_close(g, g_ref, rtol=0, atol=1e-6)
    ref, got = plain.state_dict(), checkpointed.state_dict()
    assert list(got) == list(ref)
    for k in ref:
        assert torch.equal(got[k], ref[k]), k


def test_training_is_unchanged_buffers_and_dropout_included():
    plain, net = make_net(), make_net()
    assert checkpoint_blocks(net) == ["3.0", "3.1", "3.2", "3.3"]
    assert_same_training(plain, net, batches(4))
    assert int(net[3][0].bn1.num_batches_tracked) == 4  # counted once per step, though each block ran twice


def test_torch_checkpoint_alone_counts_a_batchnorm_batch_twice():
    """Why the buffers are kept around the recompute: torch's checkpoint alone updates BatchNorm twice."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    x = torch.randn(8, 4, requires_grad=True)
    torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False).sum().backward()
    assert int(block[1].num_batches_tracked) == 2
    checkpoint_blocks(nn.Sequential(block))  # block is now "0" of that Sequential
    block(x).sum().backward()
    assert int(block[1].num_batches_tracked) == 3


def test_each_checkpointed_block_runs_twice_per_training_step_and_once_without_grad():
    net = make_net()
    checkpoint_blocks(net, every=2)
    Residual.calls = 0
    train(net, batches(1))
    assert Residual.calls == 4 + 2  # four blocks, two of them recomputed in backward
    Residual.calls = 0
    with torch.no_grad():
        net(torch.randn(2, 3, 8, 8))
    assert Residual.calls == 4


def saved_bytes(model: nn.Module, x: torch.Tensor) -> int:
    """Bytes autograd keeps for backward during one forward (what the backward pass needs to hold)."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return total


def test_less_is_kept_for_backward():
    plain, half, every = make_net(), make_net(), make_net()
    checkpoint_blocks(half, every=2)
    checkpoint_blocks(every)
    x = torch.randn(8, 3, 16, 16)
    full, some, least = saved_bytes(plain, x), saved_bytes(half, x), saved_bytes(every, x)
    assert least < some < full


def test_state_dict_keys_unchanged_and_checkpoints_load_both_ways():
    plain, net = make_net(), make_net(seed=1)
    checkpoint_blocks(net)
    assert list(net.state_dict()) == list(plain.state_dict())
    plain.load_state_dict(round_trip(net.state_dict()))  # strict: the same keys
    x = torch.randn(4, 3, 8, 8)
    plain.eval(), net.eval()
    assert torch.equal(plain(x), net(x))
    other = make_net(seed=2)
    net.load_state_dict(round_trip(other.state_dict()))
    assert torch.equal(other.eval()(x), net(x))


def test_idempotent_and_reversible():
    net = make_net()
    first = checkpoint_blocks(net, every=2)
    assert checkpoint_blocks(net, every=2) == first == ["3.0", "3.2"]
    assert_same_training(make_net(), net, batches(2))  # wrapped once: still counted once
    assert uncheckpoint_blocks(net) == first
    assert all("forward" not in vars(m) for m in net.modules())
    Residual.calls = 0
    train(net, batches(1))
    assert Residual.calls == 4
    assert uncheckpoint_blocks(net) == []


def test_a_deep_copy_is_checkpointed_on_its_own_weights():
    """An EMA or SWA copy made after checkpoint_blocks: the copy's blocks run the copy's weights."""
    net = make_net()
    checkpoint_blocks(net)
    twin = copy.deepcopy(net)
    assert twin[3][0].forward.block is twin[3][0]
    assert_same_training(make_net(), twin, batches(2))
    assert int(net[3][0].bn1.num_batches_tracked) == 0  # the original was not trained through the copy


def test_a_whole_pickled_model_stays_checkpointed():
    net = make_net()
    checkpoint_blocks(net)
    buf = io.BytesIO()
    torch.save(net, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert loaded[3][0].forward.block is loaded[3][0]
    assert_same_training(make_net(), loaded, batches(2))
    assert uncheckpoint_blocks(loaded) == ["3.0", "3.1", "3.2", "3.3"]


def test_blocks_by_name_and_by_class():
    net = make_net()
    assert checkpoint_blocks(net, blocks=["3.1", "0"]) == ["0", "3.1"]  # in the model's order
    uncheckpoint_blocks(net)
    assert checkpoint_blocks(net, blocks=Residual, every=3) == ["3.0", "3.3"]


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"every": 0}, ValueError, r"every must be an int >= 1"),
    ({"every": True}, ValueError, r"every must be an int >= 1"),
    ({"blocks": ["3.9"]}, ValueError, r"'3\.9', which is not a submodule of Sequential; its blocks: \['3\.0'"),
    ({"blocks": [3]}, TypeError, r"module names \(str\) or nn\.Module classes, got 3"),
    ({"blocks": [nn.LSTM]}, ValueError, r"the blocks= given match no submodule"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        checkpoint_blocks(make_net(), **kwargs)


def test_a_model_without_blocks_is_refused():
    with pytest.raises(ValueError, match=r"^MLP has nothing to checkpoint: no nn.Sequential or nn.ModuleList"):
        checkpoint_blocks(MLP(8, 3))


def test_a_block_with_its_own_forward_is_refused():
    net = make_net()
    net[3][1].forward = lambda x: x
    with pytest.raises(ValueError, match=r"block '3\.1' \(Residual\) already has a forward of its own"):
        checkpoint_blocks(net)


def test_blocks_found_in_the_built_in_and_torchvision_models():
    assert find_blocks(SmallCNN(1, 10)) == ["features.0", "features.1", "features.3", "features.4"]
    assert find_blocks(FastSignalCNN(1, 10)) == ["features.0", "features.2", "features.3", "features.4"]
    assert find_blocks(MLP(8, 3)) == []
    resnet = torchvision.models.resnet18(num_classes=3)
    names = [f"layer{i}.{j}" for i in range(1, 5) for j in range(2)]
    assert find_blocks(resnet) == names
    assert {type(resnet.get_submodule(n)).__name__ for n in names} == {"BasicBlock"}
    blocks = nn.ModuleList([nn.Sequential(nn.Linear(2, 2), nn.ReLU()) for _ in range(3)])
    assert find_blocks(nn.ModuleDict({"h": blocks})) == ["h.0", "h.1", "h.2"]


def test_torchvision_resnet_trains_the_same():
    torch.manual_seed(0)
    plain = torchvision.models.resnet18(num_classes=3)
    net = copy.deepcopy(plain)
    checkpoint_blocks(net)
    assert_same_training(plain, net, batches(2, shape=(3, 32, 32)))


def test_drop_path_from_its_own_generator_draws_the_same_masks():
    """add_drop_path's hooks sit inside the blocks and draw from a generator of their own: the recompute replays it."""
    torch.manual_seed(0)
    plain = torchvision.models.resnet18(num_classes=3)
    net = copy.deepcopy(plain)
    checkpoint_blocks(net)
    gens = [torch.Generator().manual_seed(5) for _ in range(2)]
    for model, g in zip((plain, net), gens, strict=True):
        add_drop_path(model, 0.5, generator=g)
    assert_same_training(plain, net, batches(2, shape=(3, 32, 32)))
    assert torch.equal(gens[0].get_state(), gens[1].get_state())  # drawn as often


def test_compiled_model_is_unchanged():
    """Under torch.compile the recompute is functional: BatchNorm still counts each batch once."""
    plain = SmallCNN(1, 3, width=4, dropout=0.0)
    net = copy.deepcopy(plain)
    checkpoint_blocks(net)
    compiled = torch.compile(net, backend="aot_eager", fullgraph=True)  # the checkpointed blocks are traced
    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 3, (8,))
    for model in (plain, compiled):
        nn.functional.cross_entropy(model(x), y).backward()
    for p_ref, p in zip(plain.parameters(), net.parameters(), strict=True):
        torch.testing.assert_close(p.grad, p_ref.grad, rtol=0, atol=1e-6)
    for b_ref, b in zip(plain.buffers(), net.buffers(), strict=True):
        torch.testing.assert_close(b, b_ref, rtol=0, atol=1e-6)
    assert int(net.features[0][1].num_batches_tracked) == 1


def test_compiled_block_with_its_own_generator_draws_the_same_masks():
    """A compiled recompute would draw from a block's generator anew: such a block runs its checkpoint eagerly."""
    def make(g: torch.Generator) -> nn.Module:
        torch.manual_seed(0)
        block = lambda: nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), DropPath(0.5, generator=g))  # noqa: E731
        return nn.Sequential(block(), block(), nn.Linear(6, 3))

    gens = [torch.Generator().manual_seed(5) for _ in range(2)]
    plain, net = make(gens[0]), make(gens[1])
    checkpoint_blocks(net)
    compiled = torch.compile(net, backend="aot_eager")
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for model in (plain, compiled):
        nn.functional.cross_entropy(model(x), y).backward()
    for p_ref, p in zip(plain.parameters(), net.parameters(), strict=True):
        torch.testing.assert_close(p.grad, p_ref.grad, rtol=0, atol=1e-6)
    assert torch.equal(gens[0].get_state(), gens[1].get_state())
    assert int(net[0][1].num_batches_tracked) == 1
