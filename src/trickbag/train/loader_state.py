"""Where a training loader's order comes from, so that a run resumed inside an epoch sees the same batches.

A ``DataLoader`` draws an epoch's order when its iterator starts: the sampler's permutation from the sampler's
generator (``RandomSampler(generator=g)``, ``SubsetRandomSampler``, ``WeightedRandomSampler``), or from a seed
drawn from the global torch RNG when it has none, and the workers' base seed from the loader's generator or the
global RNG. A checkpoint therefore keeps, beside the RNG state of the moment:

* ``generators``: the states of the loader's generators now (an epoch boundary resumes with them);
* ``epoch_start``: the global RNG and those generators as they were just before the epoch's iterator started
  (inside an epoch the loader is started again from them and replayed to the position, which also brings the
  workers' random transforms to where they were);
* ``stateful``: a loader that saves its own position (torchdata's ``StatefulDataLoader``: ``state_dict`` /
  ``load_state_dict``) and loads in the main process continues from it instead, without a replay. With workers it
  is replayed like the others: its saved state does not hold the workers' random state, so the random transforms
  after the position would differ.

``DistributedSampler`` and trickbag's own samplers order an epoch from their seed and ``set_epoch``; nothing else
is needed for them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import (
    BatchSampler,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

from trickbag import runtime

__all__ = ["loader_generators", "is_stateful", "snapshot", "position", "set_generators", "inexact_reason"]

#: samplers whose order the saved RNG and generators determine
_KNOWN = (SequentialSampler, RandomSampler, SubsetRandomSampler, WeightedRandomSampler, DistributedSampler)


def loader_generators(loader: Any) -> list[torch.Generator]:
    """The generators ``loader`` draws from: its own, its sampler's, its batch sampler's sampler's (each once).

    >>> g = torch.Generator()
    >>> loader = torch.utils.data.DataLoader(list(range(4)), shuffle=True, generator=g)
    >>> loader_generators(loader) == [g]
    True
    """
    found: list[torch.Generator] = []
    batch_sampler = getattr(loader, "batch_sampler", None)
    # persistent workers: the loader's own generator gave their seeds once, at the first epoch; a resumed run
    # starts new workers (see inexact_reason), so its state says nothing about the order
    own = None if getattr(loader, "persistent_workers", False) and _workers(loader) else loader
    for owner in (own, getattr(loader, "sampler", None), getattr(batch_sampler, "sampler", None)):
        g = getattr(owner, "generator", None)
        if isinstance(g, torch.Generator) and all(g is not f for f in found):
            found.append(g)
    return found


def is_stateful(loader: Any) -> bool:
    """Whether the loader saves and restores its own position (torchdata's ``StatefulDataLoader``)."""
    return callable(getattr(loader, "state_dict", None)) and callable(getattr(loader, "load_state_dict", None))


def snapshot(loader: Any) -> dict[str, Any]:
    """The global RNG and the loader's generators now (taken just before an epoch's iterator starts)."""
    return {"rng": runtime.get_rng_state(), "generators": [g.get_state() for g in loader_generators(loader)]}


def position(loader: Any, epoch_start: dict[str, Any] | None, mid_epoch: bool) -> dict[str, Any]:
    """What a checkpoint keeps of the training loader (see the module's docstring)."""
    return {
        "generators": [g.get_state() for g in loader_generators(loader)],
        "epoch_start": epoch_start if mid_epoch else None,
        # with workers, their random transforms are where a replay puts them, not where the loader's state does
        "stateful": loader.state_dict() if mid_epoch and is_stateful(loader) and not _workers(loader) else None,
    }


def _workers(loader: Any) -> int:
    return int(getattr(loader, "num_workers", 0) or 0)


def set_generators(loader: Any, states: list[Any] | None) -> None:
    """Put the loader's generators back to ``states`` (the same loader set-up: as many generators)."""
    gens = loader_generators(loader)
    if states is None or len(states) != len(gens):
        return
    for g, s in zip(gens, states):
        g.set_state(s)


def inexact_reason(loader: Any) -> str | None:
    """Why a resume inside an epoch may not bring ``loader`` back to the same order, or None when it will."""
    if is_stateful(loader):
        return None
    dataset = getattr(loader, "dataset", None)
    if isinstance(dataset, IterableDataset):
        return (f"the training set is an IterableDataset ({type(dataset).__name__}): a resume inside an epoch "
                "replays it from the epoch's start, the same only if it draws its randomness from torch, NumPy "
                "or Python's global random state")
    if getattr(loader, "persistent_workers", False) and _workers(loader) and \
            getattr(loader, "worker_init_fn", None) is not runtime.detached_worker:
        return ("the training loader keeps its workers between epochs (persistent_workers=True): a resumed run "
                "starts new ones, so random transforms in the workers draw other numbers than they would have; "
                "set persistent_workers=False for an exact resume")
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None and not isinstance(batch_sampler, BatchSampler):
        sampler = batch_sampler
    elif isinstance(batch_sampler, BatchSampler):
        sampler = batch_sampler.sampler
    if sampler is None or isinstance(sampler, _KNOWN) or hasattr(sampler, "set_start") or (
            callable(getattr(sampler, "state_dict", None)) and callable(getattr(sampler, "load_state_dict", None))):
        return None
    return (f"the training loader's sampler ({type(sampler).__name__}) keeps no state trickbag can save: a resume "
            "inside an epoch replays the loader from the epoch's start with the random state it began with, the "
            "same order only if the sampler draws from torch's global RNG or its .generator")
