"""In-memory sources hand the DataLoader whole batches (``BatchGather.__getitems__``): the batches
must be exactly those of the per-sample path (``__getitem__`` + torch's ``default_collate``), with and
without augmentation, in the main process and in workers; a plain ``TensorDataset`` still works with
torch's default collate."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from trickbag.data.sampler import EpochSampler
from trickbag.data.sources import BatchGather, TensorDataset, collate, random_shift
from trickbag.recipe import load_recipe
from trickbag.runtime import DistInfo
from trickbag.train.parts import make_loader


class PerSample(torch.utils.data.Dataset):
    """The reference: the same data through ``__getitem__`` only (no ``__getitems__``)."""

    def __init__(self, ds: TensorDataset) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int):
        return self.ds[i]


def _data(n: int = 37):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 1, 6, 6, generator=g), torch.randint(0, 5, (n,), generator=g)


def _batches(ds, collate_fn, seed: int, workers: int = 0):
    sampler = EpochSampler(len(ds), shuffle=True, seed=3)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, collate_fn=collate_fn, num_workers=workers,
                        generator=torch.Generator().manual_seed(seed))
    torch.manual_seed(seed)  # the augmentation draws from the global RNG (of the worker, with workers)
    return [b for epoch in range(2) for b in (sampler.set_epoch(epoch), list(loader))[1]]


@pytest.mark.parametrize("augment", [None, random_shift(1)], ids=["plain", "shifted"])
def test_batched_gather_equals_per_sample_loading_and_default_collate(augment):
    x, y = _data()
    ds = TensorDataset(x, y, augment)
    got = _batches(BatchGather(ds), collate, seed=11)
    want = _batches(PerSample(ds), default_collate, seed=11)
    assert len(got) == len(want) == 10  # 37 samples: 4 full batches and one of 5, two epochs
    for (gx, gy), (wx, wy) in zip(got, want):
        assert torch.equal(gx, wx) and torch.equal(gy, wy) and gx.dtype == wx.dtype and gy.dtype == wy.dtype
    if augment is not None:  # the shifts were actually drawn (not a no-op)
        assert not all(torch.equal(b[0], x[: len(b[0])]) for b in got)


def test_batched_gather_in_worker_processes():
    x, y = _data()
    ds = TensorDataset(x, y, random_shift(1))
    got = _batches(BatchGather(ds), collate, seed=5, workers=2)
    want = _batches(PerSample(ds), default_collate, seed=5, workers=2)
    for (gx, gy), (wx, wy) in zip(got, want):
        assert torch.equal(gx, wx) and torch.equal(gy, wy)


def test_collate_passes_other_samples_to_default_collate():
    samples = [(torch.ones(2), 1), (torch.zeros(2), 0)]
    out = collate(samples)
    assert torch.equal(out[0], torch.tensor([[1.0, 1.0], [0.0, 0.0]])) and out[1].tolist() == [1, 0]


def test_the_recipe_loader_gathers_batches_of_the_training_split():
    from trickbag.data.sources import build_data

    recipe = load_recipe("digits")
    data = build_data(recipe.data)
    loader = make_loader(data.eval_train, recipe, train=False, dist=DistInfo(), device=torch.device("cpu"))
    xb, yb = next(iter(loader))
    n = len(yb)
    assert isinstance(loader.dataset, BatchGather) and len(loader.dataset) == len(data.eval_train)
    assert torch.equal(xb, torch.stack([data.eval_train[i][0] for i in range(n)]))
    assert torch.equal(yb, torch.stack([data.eval_train[i][1] for i in range(n)]))


def test_a_plain_tensor_dataset_keeps_working_with_the_default_collate():
    x, y = _data(10)
    xb, yb = next(iter(DataLoader(TensorDataset(x, y), batch_size=4)))
    assert torch.equal(xb, x[:4]) and torch.equal(yb, y[:4])
