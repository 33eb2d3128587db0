"""Per-sample augmentation that does not depend on who draws it: the same sample in the same epoch gets the
same random crop / flip / shift in the main process, in any number of DataLoader workers, and in a run
resumed in the middle of the epoch (the sampler's ``set_start``); other epochs draw other choices.

Reference: each sample loaded alone, in this process, as ``ds[SampleIndex(i, epoch, seed)]``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from trickbag.data.sampler import EpochSampler, SampleIndex, sample_generator
from trickbag.data.sources import build_data
from trickbag.recipe import load_recipe

SEED = 5


def _image_folder(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for k in range(10):
            Image.fromarray(rng.integers(0, 255, (20, 20, 3), dtype=np.uint8)).save(root / c / f"{k}.png")
    return root


def _image_train_split(tmp_path: Path) -> Dataset:
    root = _image_folder(tmp_path / "imgs")
    recipe = load_recipe("digits", ["data.name=imagefolder", f"data.root={root}", "data.image_size=8",
                                    "data.val_fraction=0.25", "data.augment=true"])
    return build_data(recipe.data).train


def _digits_train_split() -> Dataset:
    return build_data(load_recipe("digits", ["data.augment=true"]).data).train


def _batches(ds: Dataset, epoch: int, workers: int, start: int = 0) -> list[torch.Tensor]:
    sampler = EpochSampler(len(ds), seed=SEED)
    sampler.set_epoch(epoch)
    sampler.set_start(start)
    loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=workers,
                        generator=torch.Generator().manual_seed(123))
    torch.manual_seed(999 + workers)  # the global RNG differs per call: it must not matter
    return [x for x, _ in loader]


def _reference(ds: Dataset, epoch: int) -> torch.Tensor:
    sampler = EpochSampler(len(ds), seed=SEED)
    sampler.set_epoch(epoch)
    return torch.stack([ds[SampleIndex(int(i), epoch, SEED)][0] for i in sampler])


@pytest.mark.parametrize("source", ["imagefolder", "digits"])
def test_augmentation_is_a_function_of_seed_epoch_and_index(tmp_path, source):
    ds = _image_train_split(tmp_path) if source == "imagefolder" else _digits_train_split()
    want = _reference(ds, epoch=1)
    for workers in (0, 2):
        assert torch.equal(torch.cat(_batches(ds, 1, workers)), want), workers
    # resumed after 2 batches (8 samples), in workers: the rest of the epoch, the same draws
    assert torch.equal(torch.cat(_batches(ds, 1, workers=2, start=8)), want[8:])
    # the augmentation is real: another epoch draws different crops for the same samples
    other = _reference(ds, epoch=2)
    s1, s2 = EpochSampler(len(ds), seed=SEED), EpochSampler(len(ds), seed=SEED)
    s1.set_epoch(1)
    s2.set_epoch(2)
    pos2 = {int(i): k for k, i in enumerate(s2)}
    same_sample_other_epoch = torch.stack([other[pos2[int(i)]] for i in s1])
    assert not torch.equal(same_sample_other_epoch, want)


class _UserDataset(Dataset):
    """A user's data set that augments with :func:`sample_generator` (a plain generator otherwise)."""

    def __init__(self) -> None:
        self.x = torch.arange(40.0).view(40, 1)

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i):
        g = sample_generator(i)
        noise = torch.rand(1, generator=g) if g is not None else torch.rand(1)
        return self.x[i] + noise, 0


def test_a_users_dataset_can_draw_from_sample_generator_in_workers():
    ds = _UserDataset()
    want = _reference(ds, epoch=0)
    assert torch.equal(torch.cat(_batches(ds, 0, workers=2)), want)
    assert torch.equal(torch.cat(_batches(ds, 0, workers=0, start=12)), want[12:])
    assert not torch.equal(want, _reference(ds, epoch=1).sort(0).values)  # noise differs per epoch


def test_sample_index_travels_to_workers_and_hashes_every_field():
    import pickle

    i = SampleIndex(7, epoch=2, seed=3)
    j = pickle.loads(pickle.dumps(i))
    assert (int(j), j.epoch, j.seed, j.seed_for_sample()) == (7, 2, 3, i.seed_for_sample())
    seeds = {SampleIndex(a, epoch=b, seed=c).seed_for_sample() for a in range(4) for b in range(4) for c in range(4)}
    assert len(seeds) == 64 and all(0 <= s < 2**63 for s in seeds)
    assert sample_generator(7) is None  # a plain index: the caller's own randomness
