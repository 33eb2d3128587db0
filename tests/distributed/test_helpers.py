"""trickbag.train.distributed in one process: reports, seeds, validation, SyncBatchNorm conversion.

The multi-process behaviour of the same helpers is tested in test_ddp.py.
"""

from __future__ import annotations

import copy
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from trickbag.train import distributed as D


# --------------------------------------------------------------------------- batch size and LR
@pytest.mark.parametrize("batch,acc,world,lr", [(32, 1, 2, 0.05), (64, 4, 8, 0.1), (16, 2, 3, 3e-4)])
def test_scaling_notes_give_the_linear_scaling_rule(batch: int, acc: int, world: int, lr: float) -> None:
    lines = D.scaling_notes(batch, acc, world, lr)
    eff = batch * acc * world
    assert D.effective_batch_size(batch, acc, world) == eff
    assert lines[0].startswith(f"effective batch {eff} = {batch} per process x {acc} accumulation")
    suggested = lr * world  # Goyal et al.: lr x (global batch / batch the LR was tuned for = batch x acc)
    assert f"suggests optim.lr={suggested:g} " in lines[1]
    assert f"scaled_lr({lr:g}, {eff}, base_batch_size={batch * acc})" in lines[1]


def test_scaling_notes_in_one_process_report_only_the_batch() -> None:
    assert D.scaling_notes(32, 2, 1, 0.1) == ["effective batch 64 = 32 per process x 2 accumulation steps x 1 process"]


@pytest.mark.parametrize("args", [(0, 1, 1), (8, 0, 1), (8, 1, 0), (8.0, 1, 1), (True, 1, 1)])
def test_effective_batch_size_rejects_non_positive_ints(args: tuple) -> None:
    with pytest.raises(ValueError, match="must be an int >= 1"):
        D.effective_batch_size(*args)


# --------------------------------------------------------------------------- seeds
def test_rank_seed_is_seed_plus_rank_and_validates() -> None:
    assert [D.rank_seed(5, r) for r in range(4)] == [5, 6, 7, 8]
    with pytest.raises(TypeError, match="seed must be an int"):
        D.rank_seed(1.5, 0)
    with pytest.raises(ValueError, match="rank must be an int >= 0"):
        D.rank_seed(1, -1)


def test_seed_rank_seeds_every_generator() -> None:
    D.seed_rank(4, 3)
    got = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    assert torch.equal(got[0], torch.rand(3)) and got[1] == random.random() and got[2] == np.random.rand()


def test_reseed_after_resume_keeps_rank_0_and_forks_other_ranks() -> None:
    torch.manual_seed(0)
    state = torch.get_rng_state()
    D.reseed_after_resume(0)
    a = torch.rand(2)
    torch.set_rng_state(state)
    assert torch.equal(a, torch.rand(2))  # rank 0 continues the restored stream exactly
    draws = []
    for rank in (1, 2):
        torch.set_rng_state(state)
        D.reseed_after_resume(rank)
        draws.append(torch.rand(2))
    torch.set_rng_state(state)
    base = int(torch.randint(0, 2**62, (1,)).item())
    torch.manual_seed(base + 1)
    assert torch.equal(draws[0], torch.rand(2))
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], a)


# --------------------------------------------------------------------------- one process: no communication
def test_collective_helpers_are_identities_in_one_process() -> None:
    assert not D.is_distributed() and D.world_size() == 1
    assert D.broadcast_object([1, 2]) == [1, 2]
    assert D.on_main(lambda: "x") == "x"
    with pytest.raises(KeyError):
        D.on_main(lambda: {}["missing"])
    assert D.any_rank(True) and not D.any_rank(False)
    D.barrier()
    state = SimpleNamespace(should_stop=True, stop_reason="why")
    assert D.agree_stop(state) and state.stop_reason == "why"
    state = SimpleNamespace(should_stop=False, stop_reason=None)
    assert not D.agree_stop(state) and state.stop_reason is None


# --------------------------------------------------------------------------- SyncBatchNorm
def bn_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3, momentum=None), nn.Flatten(), nn.Linear(12, 4),
                         nn.BatchNorm1d(4), nn.Sequential(nn.ReLU(), nn.BatchNorm1d(4, affine=False)))


def test_convert_sync_batchnorm_keeps_parameters_buffers_and_keys() -> None:
    ref = bn_net()
    net = D.convert_sync_batchnorm(copy.deepcopy(ref))
    kinds = [type(m) for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert kinds == [D.SyncBatchNorm] * 3
    assert net.state_dict().keys() == ref.state_dict().keys()  # checkpoints stay interchangeable
    ref2 = bn_net()
    old_bn = ref2[1]
    conv = D.convert_sync_batchnorm(ref2)
    assert conv[1] is not old_bn
    assert conv[1].weight is old_bn.weight and conv[1].running_mean is old_bn.running_mean  # shared, not copied
    assert conv[1].momentum is None and conv[5][1].affine is False
    with pytest.raises(TypeError, match="torch.nn.Module"):
        D.convert_sync_batchnorm("model")


def test_sync_batchnorm_in_one_process_is_batchnorm() -> None:
    ref = bn_net()
    net = D.convert_sync_batchnorm(copy.deepcopy(ref))
    x = torch.randn(6, 2, 4, 4)
    for _ in range(2):  # training: batch statistics, running stats (cumulative average, momentum=None)
        torch.testing.assert_close(net(x), ref(x))
    net.eval(), ref.eval()
    torch.testing.assert_close(net(x), ref(x))
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(net.state_dict()[k], v, msg=k)


def test_sync_batchnorm_rejects_1d_input() -> None:
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        D.SyncBatchNorm(3)(torch.randn(3))
