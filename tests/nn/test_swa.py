"""SWA against references written here: the arithmetic mean of snapshots, torch's update_bn on a copy."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.optim.swa_utils import update_bn

from trickbag.nn import SWA, freeze, unfreeze

from .helpers import round_trip


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4, 2))


def set_random_weights(model: nn.Module, g: torch.Generator) -> dict[str, torch.Tensor]:
    """New random parameters (as an optimizer step would give) and a moved BatchNorm; return a snapshot."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
        model.train()
        model(torch.randn(8, 3, generator=g) * 2 + 1)  # moves the running statistics
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def averaged(model: nn.Module, g: torch.Generator, n: int) -> SWA:
    """An SWA of ``model`` after ``n`` updates, each on new random weights drawn from ``g``."""
    swa = SWA(model)
    for _ in range(n):
        set_random_weights(model, g)
        swa.update(model)
    return swa


def batches(seed: int = 1, n: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(16, 3, generator=g) * 3 - 1, torch.zeros(16, dtype=torch.long)) for _ in range(n)]


def test_average_is_the_arithmetic_mean_of_the_snapshots_and_buffers_follow_the_model():
    model = make_model()
    swa = SWA(model)
    g = torch.Generator().manual_seed(2)
    snaps = []
    for _ in range(4):
        snaps.append(set_random_weights(model, g))
        swa.update(model)
    assert swa.n_averaged == 4
    for name, p in swa.module.named_parameters():
        mean = sum(s[name].double() for s in snaps) / len(snaps)
        torch.testing.assert_close(p.double(), mean, rtol=1e-6, atol=1e-7, msg=name)
    for name, b in swa.module.named_buffers():  # buffers are copied from the last update, not averaged
        assert torch.equal(b, snaps[-1][name]), name
    assert not swa.module.training and all(not p.requires_grad for p in swa.module.parameters())


def test_update_bn_equals_torch_update_bn_on_a_copy_and_keeps_the_callers_rng():
    model = make_model()
    swa = averaged(model, torch.Generator().manual_seed(3), 3)
    assert swa.bn_stale
    ref = copy.deepcopy(swa.module)
    update_bn(batches(), ref)  # torch's own, on a copy of the averaged weights
    torch.manual_seed(123)
    rng_before = torch.get_rng_state()
    swa.update_bn(batches(), device="cpu")
    assert torch.equal(torch.get_rng_state(), rng_before)  # dropout in train mode drew numbers inside
    assert not swa.bn_stale and not swa.module.training
    for (name, got), want in zip(swa.module.named_buffers(), ref.buffers()):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7, msg=name)
    assert not torch.allclose(swa.module[1].running_mean, model[1].running_mean)  # recomputed, not copied
    # without fork_rng the same pass does move the global stream (so the check above can fail)
    torch.manual_seed(123)
    update_bn(batches(), copy.deepcopy(swa.module))
    assert not torch.equal(torch.get_rng_state(), rng_before)


def test_update_bn_keeps_the_statistics_of_frozen_batchnorm_layers_while_they_are_frozen():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 4), nn.BatchNorm1d(4))
    freeze(model, ["1.*"], freeze_bn_stats=True)
    with torch.no_grad():
        model[1].running_mean.fill_(0.5)
        model[1].running_var.fill_(2.0)
    g = torch.Generator().manual_seed(4)
    swa = averaged(model, g, 2)
    frozen_stats = [t.clone() for t in (model[1].running_mean, model[1].running_var, model[1].num_batches_tracked)]
    ref = copy.deepcopy(swa.module)
    update_bn(batches(), ref)
    swa.update_bn(batches())
    for t, want in zip((swa.module[1].running_mean, swa.module[1].running_var, swa.module[1].num_batches_tracked),
                       frozen_stats):
        assert torch.equal(t, want)  # frozen: kept
    torch.testing.assert_close(swa.module[3].running_mean, ref[3].running_mean)  # the other: recomputed
    torch.testing.assert_close(swa.module[3].running_var, ref[3].running_var)
    # once the live model releases the layer, the next update_bn recomputes it too
    unfreeze(model, ["1.*"])
    set_random_weights(model, g)
    swa.update(model)
    ref = copy.deepcopy(swa.module)
    update_bn(batches(), ref)
    swa.update_bn(batches())
    torch.testing.assert_close(swa.module[1].running_mean, ref[1].running_mean)
    assert not torch.allclose(swa.module[1].running_mean, torch.full((4,), 0.5))


def test_swapped_puts_the_average_in_and_restores_bit_identically_even_on_error():
    model = make_model()
    g = torch.Generator().manual_seed(5)
    swa = averaged(model, g, 2)
    swa.update_bn(batches())
    set_random_weights(model, g)
    raw = copy.deepcopy(model.state_dict())
    tensors = list(model.parameters()) + list(model.buffers())
    ptrs = [(id(t), t.data_ptr()) for t in tensors]
    with swa.swapped(model) as m:
        assert m is model
        for k, v in model.state_dict().items():
            assert torch.equal(v, swa.module.state_dict()[k]), k
        assert not torch.equal(model[0].weight, raw["0.weight"])
    for k, v in model.state_dict().items():
        assert torch.equal(v, raw[k]), k
    # in place: the optimizer keeps its tensors and their storage
    assert [(id(t), t.data_ptr()) for t in list(model.parameters()) + list(model.buffers())] == ptrs
    with pytest.raises(RuntimeError, match="boom"):
        with swa.swapped(model):
            raise RuntimeError("boom")
    for k, v in model.state_dict().items():
        assert torch.equal(v, raw[k]), k


def test_copy_to_and_wrapped_models():
    model = make_model()
    swa = SWA(nn.DataParallel(model))
    assert all(not k.startswith("module.") for k in swa.module.state_dict())
    g = torch.Generator().manual_seed(6)
    first = set_random_weights(model, g)
    swa.update(nn.DataParallel(model))
    second = set_random_weights(model, g)
    swa.update(torch.compile(model))
    target = make_model(seed=9)
    swa.copy_to(target)
    torch.testing.assert_close(target[0].weight, (first["0.weight"] + second["0.weight"]) / 2)
    for k, v in target.state_dict().items():
        assert torch.equal(v, swa.module.state_dict()[k]), k


def test_state_dict_round_trip_continues_identically():
    g = torch.Generator().manual_seed(7)
    model = make_model()
    a = averaged(model, g, 3)
    state = round_trip(a.state_dict())
    b = SWA(make_model(seed=4))
    b.load_state_dict(state)
    assert (b.n_averaged, b.bn_stale) == (3, True)
    for _ in range(2):
        set_random_weights(model, g)
        a.update(model)
        b.update(model)
    a.update_bn(batches())
    b.update_bn(batches())
    assert b.n_averaged == 5
    for (k, va), vb in zip(a.module.state_dict().items(), b.module.state_dict().values()):
        assert torch.equal(va, vb), k
    with pytest.raises(ValueError, match="n_averaged"):
        b.load_state_dict({"module": state["module"], "bn_stale": False})


def test_argument_errors():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        SWA("model")  # type: ignore[arg-type]
    swa = SWA(make_model())
    with pytest.raises(ValueError, match="same parameters/buffers as the one the SWA"):
        swa.update(nn.Linear(3, 4))
    with pytest.raises(ValueError, match="same parameters/buffers"):
        with swa.swapped(nn.Linear(3, 4)):
            pass
