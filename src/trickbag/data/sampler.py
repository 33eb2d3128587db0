"""A sampler whose order is a pure function of (seed, epoch), resumable mid-epoch and shardable across ranks,
and whose indices carry (seed, epoch) so per-sample augmentation does not depend on who loads the sample."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

__all__ = ["EpochSampler", "SampleIndex", "sample_generator"]

_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of ``x``."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class SampleIndex(int):
    """A dataset index that also carries the run seed and the epoch that draws it.

    Datasets that augment (trickbag's in-memory and image-folder sources) seed each sample's random
    choices from :meth:`seed_for_sample` = hash(seed, epoch, index): the same sample in the same
    epoch gets the same crop, flip or shift whether it is loaded in the main process or in any
    DataLoader worker, in an uninterrupted run or after a resume. Anything else sees a plain int.

    >>> i = SampleIndex(7, epoch=2, seed=0)
    >>> i + 1, i.seed_for_sample() == SampleIndex(7, epoch=2, seed=0).seed_for_sample()
    (8, True)
    >>> i.seed_for_sample() != SampleIndex(7, epoch=3, seed=0).seed_for_sample()
    True
    """

    epoch: int
    seed: int

    def __new__(cls, index: int, epoch: int = 0, seed: int = 0) -> SampleIndex:
        obj = super().__new__(cls, index)
        obj.epoch, obj.seed = int(epoch), int(seed)
        return obj

    def __reduce__(self) -> tuple[Any, ...]:  # to DataLoader workers
        return (SampleIndex, (int(self), self.epoch, self.seed))

    def seed_for_sample(self) -> int:
        """A 63-bit seed from (seed, epoch, index)."""
        return _mix(_mix(_mix(self.seed) ^ self.epoch) ^ int(self)) & (2**63 - 1)


def sample_generator(index: Any) -> torch.Generator | None:
    """A CPU generator seeded for this sample when ``index`` is a :class:`SampleIndex`, else None
    (the caller then draws from torch's global generator)."""
    if isinstance(index, SampleIndex):
        return torch.Generator().manual_seed(index.seed_for_sample())
    return None


class EpochSampler(Sampler[int]):
    """Shuffle (or not) ``n`` indices with a permutation fixed by ``(seed, epoch)``; shard it over ranks.

    * ``set_epoch(e)`` picks the epoch's permutation (call it every epoch, as with DistributedSampler);
    * ``set_start(k)`` skips the first ``k`` indices of this rank's shard once, so a run resumed from
      a mid-epoch checkpoint sees exactly the samples it had not seen yet;
    * with ``world_size > 1`` and ``pad=True`` (training) the permutation is padded by wrapping
      around so every rank gets the same number of samples; ``pad=False`` (evaluation) gives uneven
      shards and never counts a sample twice;
    * ``set_weights(w)`` (training, ``shuffle=True``): each epoch draws ``n`` indices with replacement,
      index ``i`` with probability ``w[i] / sum(w)``, from the same ``(seed, epoch)`` generator, in place
      of the permutation (sharded, resumed and padded the same way).

    >>> s = EpochSampler(10, seed=0); s.set_epoch(3); a = list(s)
    >>> s2 = EpochSampler(10, seed=0); s2.set_epoch(3); s2.set_start(4); a[4:] == list(s2)
    True
    >>> sorted(a) == list(range(10))
    True
    """

    def __init__(
        self, n: int, *, shuffle: bool = True, seed: int = 0, rank: int = 0, world_size: int = 1, pad: bool = True
    ) -> None:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
        self.n, self.shuffle, self.seed = n, shuffle, seed
        self.rank, self.world_size, self.pad = rank, world_size, pad
        self.epoch = 0
        self.start = 0
        self.weights: torch.Tensor | None = None

    def set_weights(self, weights: torch.Tensor | None) -> None:
        """Draw each epoch's indices with replacement in proportion to ``weights`` (one per index; None: a
        permutation). ``ValueError`` for the wrong length, a negative or non-finite weight, or all zero."""
        if weights is not None:
            w = torch.as_tensor(weights, dtype=torch.float64).flatten()
            if len(w) != self.n:
                raise ValueError(f"sample weights: {len(w)} given for {self.n} samples")
            if not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or not bool((w > 0).any()):
                raise ValueError("sample weights must be finite, >= 0 and not all 0")
            if not self.shuffle:
                raise ValueError("sample weights are for the training sampler (shuffle=True)")
            weights = w
        self.weights = weights

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def set_start(self, start: int) -> None:
        self.start = max(0, int(start))

    def _shard(self) -> torch.Tensor:
        if self.shuffle:
            seed = int(np.random.SeedSequence([self.seed % 2**63, self.epoch]).generate_state(1, np.uint64)[0])
            g = torch.Generator()
            g.manual_seed(seed % 2**63)
            if self.weights is None:
                perm = torch.randperm(self.n, generator=g)
            else:
                perm = torch.multinomial(self.weights, self.n, replacement=True, generator=g)
        else:
            perm = torch.arange(self.n)
        if self.world_size > 1:
            if self.pad and self.n:
                total = math.ceil(self.n / self.world_size) * self.world_size
                reps = math.ceil(total / self.n)
                perm = perm.repeat(reps)[:total]
            perm = perm[self.rank :: self.world_size]
        return perm

    def __iter__(self) -> Iterator[int]:
        shard = self._shard()[self.start :]
        self.start = 0
        epoch, seed = self.epoch, self.seed
        return iter([SampleIndex(i, epoch, seed) for i in shard.tolist()])

    def __len__(self) -> int:
        if self.world_size > 1:
            per = math.ceil(self.n / self.world_size) if self.pad else len(range(self.rank, self.n, self.world_size))
        else:
            per = self.n
        return max(0, per - self.start)

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.seed, self.epoch = int(state["seed"]), int(state["epoch"])
