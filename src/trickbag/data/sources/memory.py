"""In-memory data: tensors as a dataset, whole-batch gathering, stratified splits, training statistics."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from trickbag.data.sampler import sample_generator
from trickbag.data.sources.splits import DataSplits

__all__ = ["TensorDataset", "BatchGather", "Collated", "collate", "random_shift", "split_indices", "tensor_splits"]


class Collated(tuple):
    """A batch a dataset already assembled in ``__getitems__``; :func:`collate` passes it through."""


def collate(samples: Any) -> Any:
    """A ``collate_fn``: a :class:`Collated` batch as it is, anything else through torch's ``default_collate``."""
    if isinstance(samples, Collated):
        return tuple(samples)
    from torch.utils.data import default_collate

    return default_collate(samples)


class TensorDataset(Dataset):
    """In-memory ``(x, y)`` dataset with an optional per-sample augmentation ``augment(x, generator)``.

    Indexed with a :class:`~trickbag.data.sampler.SampleIndex` (as the run's loaders do), each
    sample's augmentation draws from a generator seeded by (seed, epoch, index); with a plain int,
    from torch's global generator.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, augment: Optional[Callable] = None) -> None:
        self.x, self.y, self.augment = x, y, augment

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        x = self.x[i]
        if self.augment is not None:
            x = self.augment(x, sample_generator(i))
        return x, self.y[i]

    def gather(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch of ``indices`` as ``(x, y)``: one indexing op per tensor, the augmentation per sample
        (the same random numbers as ``__getitem__`` one by one)."""
        idx = torch.as_tensor([int(i) for i in indices], dtype=torch.long)
        if self.augment is None:
            x = self.x.index_select(0, idx)
        else:
            x = torch.stack([self.augment(self.x[int(i)], sample_generator(i)) for i in indices])
        return x, self.y.index_select(0, idx)


class BatchGather(Dataset):
    """A view of a :class:`TensorDataset` that hands the DataLoader whole batches; use it with :func:`collate`.

    The DataLoader calls ``__getitems__`` with a batch's indices: the batch is then gathered with one
    indexing op per tensor instead of one ``__getitem__`` per sample and a stack. The batches are
    the same tensors as the per-sample path's. The view is separate so that a DataLoader with torch's
    default ``collate_fn`` over a plain :class:`TensorDataset` keeps working as before.

    >>> ds = TensorDataset(torch.arange(12.0).view(6, 1, 2), torch.arange(6))
    >>> from torch.utils.data import DataLoader
    >>> x, y = next(iter(DataLoader(BatchGather(ds), batch_size=4, collate_fn=collate)))
    >>> torch.equal(x, torch.stack([ds[i][0] for i in range(4)])), y.tolist()
    (True, [0, 1, 2, 3])
    """

    def __init__(self, dataset: TensorDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        return self.dataset[i]

    def __getitems__(self, indices: list[int]) -> Collated:
        return Collated(self.dataset.gather(indices))

    def __getattr__(self, name: str) -> Any:  # x, y, augment, ... of the wrapped dataset
        if name == "dataset":
            raise AttributeError(name)
        return getattr(self.dataset, name)


def random_shift(max_shift: int = 1) -> Callable[..., torch.Tensor]:
    """``shift(x, generator=None)``: translate a ``[C, H, W]`` or ``[C, L]`` sample by up to ``max_shift``
    pixels in each spatial dimension, zero-filled."""

    def shift(x: torch.Tensor, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        d = torch.randint(-max_shift, max_shift + 1, (x.dim() - 1,), generator=generator).tolist()
        out = torch.zeros_like(x)
        src = [slice(None)]
        dst = [slice(None)]
        for k, n in zip(d, x.shape[1:]):
            src.append(slice(max(0, -k), n - max(0, k)))
            dst.append(slice(max(0, k), n - max(0, -k)))
        out[tuple(dst)] = x[tuple(src)]
        return out

    return shift


def split_indices(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stratified split of ``arange(len(y))`` into (rest, held_out) with ``fraction`` held out."""
    from trickbag._optional import require

    train_test_split = require("sklearn.model_selection", extra="app").train_test_split

    idx = np.arange(len(y))
    if fraction <= 0:
        return idx, idx[:0]
    counts = np.bincount(y)
    stratify = y if counts[counts > 0].min() >= 2 and round(fraction * len(y)) >= len(counts[counts > 0]) else None
    rest, held = train_test_split(idx, test_size=fraction, random_state=seed, stratify=stratify)
    return np.sort(rest), np.sort(held)


def tensor_splits(
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: Any,
    *,
    augment: Optional[Callable],
    test: Optional[tuple[torch.Tensor, torch.Tensor]] = None,
    classes: Optional[list[str]] = None,
    normalise: bool = True,
    encode: Optional[Callable[[np.ndarray], Callable[[torch.Tensor], torch.Tensor]]] = None,
    per_feature: bool = False,
) -> DataSplits:
    """Split ``x [N, ...]`` / ``y [N]`` (stratified), normalise with training statistics, wrap as datasets.

    ``encode(train_rows)`` returns a row-wise input transform fitted on the training rows only (e.g.
    bin edges); it is applied to every split before normalisation.
    """
    yn = y.numpy()
    if test is None:
        rest, test_idx = split_indices(yn, cfg.test_fraction, cfg.split_seed)
        x_test, y_test = x[test_idx], y[test_idx]
    else:
        rest = np.arange(len(yn))
        x_test, y_test = test
    tr_idx_local, val_idx_local = split_indices(yn[rest], cfg.val_fraction, cfg.split_seed + 1)
    tr, va = rest[tr_idx_local], rest[val_idx_local]
    if encode is not None:
        transform = encode(tr)
        x, x_test = transform(x), transform(x_test)
    x_tr, y_tr = x[tr], y[tr]
    if normalise:  # statistics of the training part only: per channel, or per feature (tabular columns)
        dims = [0] if per_feature else [0] + list(range(2, x.dim()))
        mean = x_tr.mean(dim=dims, keepdim=True)[0]
        std = x_tr.std(dim=dims, keepdim=True)[0].clamp_min(1e-8)
        norm = lambda t: (t - mean) / std  # noqa: E731
    else:
        mean = std = None
        norm = lambda t: t  # noqa: E731
    num_classes = int(max(int(y.max()), int(y_test.max()) if len(y_test) else 0)) + 1
    counts = torch.bincount(y_tr, minlength=num_classes).tolist()
    return DataSplits(
        train=TensorDataset(norm(x_tr), y_tr, augment),
        val=TensorDataset(norm(x[va]), y[va]) if len(va) else None,
        test=TensorDataset(norm(x_test), y_test) if len(y_test) else None,
        num_classes=num_classes,
        input_shape=tuple(x.shape[1:]),
        class_counts=counts,
        classes=classes or [str(i) for i in range(num_classes)],
        eval_train=TensorDataset(norm(x_tr), y_tr),
        normalise=norm,
    )
