"""tsn_indices: dtype, range, order, segment membership (exact fractions) and the TSN centre formula."""

import math
from fractions import Fraction

import pytest
import torch

from trickbag.data import tsn_indices


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def segment_of(i, f, s):
    """Segment k with k*F/S <= i + 1/2 < (k+1)*F/S (frame i's midpoint), in exact arithmetic."""
    return math.floor((Fraction(i) + Fraction(1, 2)) * s / f)


CASES = [(f, s) for f in (1, 2, 3, 5, 7, 8, 10, 16, 33, 100, 301) for s in (1, 2, 3, 4, 7, 8, 16)]


@pytest.mark.parametrize("train", [False, True])
def test_int64_sorted_in_range_for_all_shapes(train):
    for seed, (f, s) in enumerate(CASES):
        idx = tsn_indices(f, s, train=train, generator=gen(seed))
        assert idx.dtype == torch.int64, (f, s)
        assert idx.shape == (s,), (f, s)
        assert int(idx.min()) >= 0 and int(idx.max()) < f, (f, s, idx)
        assert bool((idx[1:] >= idx[:-1]).all()), (f, s, idx)


def test_eval_is_the_tsn_centre_formula():
    for f, s in CASES:
        expected = [math.floor((k + Fraction(1, 2)) * Fraction(f, s)) for k in range(s)]
        assert tsn_indices(f, s, train=False).tolist() == expected, (f, s)
    # the float form used by TSN's test-time sampler: int(tick / 2 + tick * k), tick = F / S
    assert tsn_indices(250, 25, train=False).tolist() == [int(10 / 2 + 10 * k) for k in range(25)]
    assert tsn_indices(10, 3, train=False).tolist() == [1, 5, 8]


@pytest.mark.parametrize("train", [False, True])
def test_each_index_lies_in_its_own_segment(train):
    for seed, (f, s) in enumerate(CASES):
        if f < s:
            continue
        for rep in range(3):
            idx = tsn_indices(f, s, train=train, generator=gen(100 * seed + rep)).tolist()
            assert [segment_of(i, f, s) for i in idx] == list(range(s)), (f, s, idx)


def test_train_draws_every_frame_of_a_segment_uniformly():
    # F=10, S=3: segments by frame midpoint are {0,1,2}, {3,4,5,6}, {7,8,9}.
    g, n = gen(1), 3000
    draws = torch.stack([tsn_indices(10, 3, train=True, generator=g) for _ in range(n)])
    for k, frames in enumerate([[0, 1, 2], [3, 4, 5, 6], [7, 8, 9]]):
        counts = torch.bincount(draws[:, k], minlength=10)[frames].double()
        assert counts.sum().item() == n
        p = 1 / len(frames)
        assert bool(((counts / n - p).abs() < 5 * (p * (1 - p) / n) ** 0.5).all()), (k, counts)


def test_fewer_frames_than_segments_repeats_frames():
    assert tsn_indices(3, 5, train=False).tolist() == [0, 0, 1, 2, 2]
    assert tsn_indices(1, 4, train=True, generator=gen()).tolist() == [0, 0, 0, 0]
    g = gen(2)
    for _ in range(50):
        idx = tsn_indices(3, 8, train=True, generator=g).tolist()
        # segment k covers time [k*3/8, (k+1)*3/8): its frame is one that overlaps it
        for k, i in enumerate(idx):
            assert math.floor(Fraction(3 * k, 8)) <= i <= min(math.floor(Fraction(3 * (k + 1), 8)), 2)


def test_train_is_random_but_seeded():
    a = tsn_indices(100, 8, train=True, generator=gen(5))
    assert torch.equal(a, tsn_indices(100, 8, train=True, generator=gen(5)))
    assert not torch.equal(a, tsn_indices(100, 8, train=True, generator=gen(6)))


@pytest.mark.parametrize(
    "args, kwargs, exc, match",
    [
        ((0, 3), {"train": True}, ValueError, "num_frames"),
        ((-4, 3), {"train": False}, ValueError, "num_frames"),
        ((10.0, 3), {"train": False}, TypeError, "num_frames"),
        ((10, 0), {"train": False}, ValueError, "num_segments"),
        ((10, 3), {"train": 1}, TypeError, "train"),
    ],
)
def test_rejects_bad_arguments(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        tsn_indices(*args, **kwargs)
