"""In-memory data: tensors as a dataset, whole-batch gathering, stratified splits, training statistics."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from trickbag.data.sampler import sample_generator
from trickbag.data.sources.hard import describe_hard, harden, requested
from trickbag.data.sources.splits import DataSplits
from trickbag.errors import DataError

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

    def __init__(self, x: torch.Tensor, y: torch.Tensor, augment: Callable | None = None) -> None:
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

    def shift(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
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


def split_indices(y: np.ndarray, fraction: float, seed: int, key: str = "the split") -> tuple[np.ndarray, np.ndarray]:
    """Split ``arange(len(y))`` into (rest, held_out) with ``fraction`` held out, stratified by class when
    ``y`` holds class indices and every class has two samples; :class:`DataError` naming ``key`` when a
    part would be empty."""
    from trickbag._optional import require

    idx = np.arange(len(y))
    if fraction <= 0:
        return idx, idx[:0]
    held_n = int(np.ceil(fraction * len(y)))
    if held_n < 1 or len(y) - held_n < 1:
        raise DataError(f"{key}={fraction} leaves {len(y) - held_n} of {len(y)} samples for the rest and {held_n} "
                        "held out; both need at least one: use more data or another fraction")
    stratify = None
    if y.ndim == 1 and not np.issubdtype(y.dtype, np.floating):
        counts = np.bincount(y)
        if counts[counts > 0].min() >= 2 and held_n >= len(counts[counts > 0]) <= len(y) - held_n:
            stratify = y
    train_test_split = require(
        "sklearn.model_selection", extra="app", feature="splitting the data into train / val / test"
    ).train_test_split
    rest, held = train_test_split(idx, test_size=held_n, random_state=seed, stratify=stratify)
    return np.sort(rest), np.sort(held)


def _standardiser(t: torch.Tensor, dims: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, std)`` of ``t`` over ``dims`` for ``(v - mean) / std``; a column constant in ``t`` (std ~ 0, e.g.
    a category never seen in training) is only centred, so a value it never had stays a small number."""
    mean = t.mean(dim=dims, keepdim=True)[0]
    std = t.std(dim=dims, keepdim=True)[0] if len(t) > 1 else torch.ones_like(mean)
    std = torch.where(std > 1e-6 * mean.abs().clamp_min(1e-12), std, torch.ones_like(std))
    return mean, std


def _target_scale(y_tr: torch.Tensor, stats: dict[str, Any] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Regression targets' (mean, std): the stored ones, or the training split's (std at least 1e-8)."""
    if stats is not None and stats.get("target_mean") is not None:
        return torch.tensor(stats["target_mean"]), torch.tensor(stats["target_std"])
    std = y_tr.std(0) if len(y_tr) > 1 else torch.ones(y_tr.shape[1])
    return y_tr.mean(0), std.clamp_min(1e-8)


def _split(x: torch.Tensor, y: torch.Tensor, cfg: Any, test: tuple[torch.Tensor, torch.Tensor] | None) -> tuple[
        np.ndarray, np.ndarray, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any] | None]:
    """Training and validation positions, the test split, the labels (noisy with ``data.label_noise``) and what
    :func:`~trickbag.data.sources.hard.harden` did (None when no harder-data key is set)."""
    yn = y.numpy()
    if test is None:
        rest, test_idx = split_indices(yn, cfg.test_fraction, cfg.split_seed, "data.test_fraction")
        x_test, y_test = x[test_idx], y[test_idx]
    else:
        rest = np.arange(len(yn))
        x_test, y_test = test
    tr_local, va_local = split_indices(yn[rest], cfg.val_fraction, cfg.split_seed + 1, "data.val_fraction")
    tr, va = rest[tr_local], rest[va_local]
    hard = None
    if requested(cfg):
        n_classes = int(max(int(y.max()), int(y_test.max()) if len(y_test) else 0)) + 1
        y, tr, va, hard = harden(y, tr, va, n_classes, cfg)
    return tr, va, x_test, y_test, y, hard


def tensor_splits(
    x: torch.Tensor,
    y: torch.Tensor,
    cfg: Any,
    *,
    augment: Callable | None,
    test: tuple[torch.Tensor, torch.Tensor] | None = None,
    classes: list[str] | None = None,
    normalise: bool = True,
    encode: Callable[[np.ndarray], Callable[[torch.Tensor], torch.Tensor]] | None = None,
    per_feature: bool = False,
    standardise_targets: bool = False,
    stats: dict[str, Any] | None = None,
) -> DataSplits:
    """Split ``x [N, ...]`` / ``y`` (stratified for class labels), normalise with training statistics, wrap.

    ``y``: class indices ``[N]`` (int), 0/1 labels ``[N, L]`` (float, multi-label) or numbers
    ``[N, T]`` (float, regression: with ``standardise_targets`` they are standardised with the
    training mean and std, kept in ``target_mean`` / ``target_std``). ``encode(train_rows)``
    returns a row-wise input transform fitted on the training rows only (e.g. bin edges); it is
    applied to every split before normalisation.

    ``stats``: a run's stored statistics (``mean``/``std`` as nested lists, ``target_mean``/``target_std``)
    used instead of the training split's; the ones used are kept in ``fitted["normalise"]``.
    """
    tr, va, x_test, y_test, y, hard = _split(x, y, cfg, test)
    transform = encode(tr) if encode is not None else (lambda t: t)
    if encode is not None:
        x, x_test = transform(x), transform(x_test)
    x_tr, y_tr = x[tr], y[tr]
    # statistics of the training part only: per channel, or per feature (tabular columns)
    if stats is not None:
        mean, std = torch.tensor(stats["mean"], dtype=x.dtype), torch.tensor(stats["std"], dtype=x.dtype)
    elif normalise:
        mean, std = _standardiser(x_tr, [0] if per_feature else [0] + list(range(2, x.dim())))
    else:
        mean, std = torch.zeros(()), torch.ones(())
    norm = lambda t: (t - mean) / std  # noqa: E731
    target_mean, target_std = _target_scale(y_tr, stats) if standardise_targets else (None, None)
    if target_mean is not None and target_std is not None:
        y, y_test = (y - target_mean) / target_std, (y_test - target_mean) / target_std
        y_tr = y[tr]
    if y.is_floating_point():
        num_classes = int(y.shape[1])
        counts = y_tr.sum(0).round().long().tolist()
    else:
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
        target_mean=None if target_mean is None else target_mean.tolist(),
        target_std=None if target_std is None else target_std.tolist(),
        prepare=lambda raw: norm(transform(raw)),
        fitted={"normalise": {"mean": mean.tolist(), "std": std.tolist()}, **({"hard": hard} if hard else {})},
        notes=[describe_hard(hard)] if hard else [],
    )
