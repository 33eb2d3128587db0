"""EpochSampler: a permutation fixed by (seed, epoch), mid-epoch start, rank sharding with and without padding."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from torch.utils.data import DataLoader

from trickbag.data.sampler import EpochSampler


def order(n, epoch=0, **kw) -> list[int]:
    s = EpochSampler(n, **kw)
    s.set_epoch(epoch)
    return list(s)


def test_each_epoch_is_a_permutation_fixed_by_seed_and_epoch():
    a = order(50, epoch=3, seed=7)
    assert sorted(a) == list(range(50))
    torch.manual_seed(123)  # the global RNG plays no part
    assert order(50, epoch=3, seed=7) == a
    assert order(50, epoch=4, seed=7) != a
    assert order(50, epoch=3, seed=8) != a
    assert a != list(range(50))


def test_epoch_orders_are_not_a_shifted_copy_of_each_other():
    """A seed of seed + epoch would make (seed=1, epoch=0) equal (seed=0, epoch=1)."""
    assert order(30, epoch=1, seed=0) != order(30, epoch=0, seed=1)


def test_no_shuffle_is_the_identity():
    assert order(7, epoch=5, shuffle=False) == list(range(7))


def test_set_start_skips_the_first_indices_once():
    full = order(20, epoch=2, seed=1)
    s = EpochSampler(20, seed=1)
    s.set_epoch(2)
    s.set_start(6)
    assert len(s) == 14
    assert list(s) == full[6:]
    assert list(s) == full and len(s) == 20  # the next pass starts from the beginning again


def test_set_start_in_a_dataloader_resumes_the_exact_batches():
    s = EpochSampler(23, seed=4)
    s.set_epoch(1)
    full = [b.tolist() for b in DataLoader(list(range(23)), batch_size=5, sampler=s)]
    s.set_start(2 * 5)
    rest = [b.tolist() for b in DataLoader(list(range(23)), batch_size=5, sampler=s)]
    assert rest == full[2:]


@pytest.mark.parametrize("n,world", [(10, 3), (12, 4), (5, 8), (1, 2), (0, 3)])
def test_sharding_without_padding_covers_every_index_exactly_once(n, world):
    shards = [order(n, epoch=1, seed=2, rank=r, world_size=world, pad=False) for r in range(world)]
    assert sorted(i for sh in shards for i in sh) == list(range(n))
    for r, sh in enumerate(shards):
        assert len(EpochSampler(n, rank=r, world_size=world, pad=False)) == len(sh)


@pytest.mark.parametrize("n,world", [(10, 3), (12, 4), (5, 8), (1, 2)])
def test_sharding_with_padding_gives_equal_lengths_and_covers_everything(n, world):
    shards = [order(n, epoch=1, seed=2, rank=r, world_size=world, pad=True) for r in range(world)]
    per = math.ceil(n / world)
    assert [len(sh) for sh in shards] == [per] * world
    assert [len(EpochSampler(n, rank=r, world_size=world)) for r in range(world)] == [per] * world
    counts = Counter(i for sh in shards for i in sh)
    assert set(counts) == set(range(n))
    # padding wraps around: the total is exactly per * world and no index repeats more than needed
    total = per * world
    assert sum(counts.values()) == total
    assert all(c in (total // n, math.ceil(total / n)) for c in counts.values())


def test_set_start_with_sharding_skips_within_this_ranks_shard():
    shard = order(17, epoch=0, rank=1, world_size=3)
    s = EpochSampler(17, rank=1, world_size=3)
    s.set_start(2)
    assert list(s) == shard[2:]


def test_state_dict_round_trip():
    a = EpochSampler(9, seed=3)
    a.set_epoch(6)
    b = EpochSampler(9, seed=0)
    b.load_state_dict(a.state_dict())
    assert list(b) == list(a)


@pytest.mark.parametrize(
    "kw,match",
    [({"n": -1}, "n must be >= 0"), ({"n": 4, "rank": 2, "world_size": 2}, "rank must be in"),
     ({"n": 4, "rank": -1, "world_size": 2}, "rank must be in")],
)
def test_bad_arguments(kw, match):
    n = kw.pop("n")
    with pytest.raises(ValueError, match=match):
        EpochSampler(n, **kw)
