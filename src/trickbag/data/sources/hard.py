"""Harder versions of an in-memory classification set: fewer training samples, a long tail, noisy labels.

Three ``data`` keys make a set that sits at its ceiling (digits, MNIST-1D) hard enough for a training trick to
show, offline and reproducibly. Each is drawn from a generator seeded by ``data.split_seed`` (the same bits on
every run of a recipe) and applied after the train / validation / test split, in this order:

- ``data.train_samples: N`` keeps N training samples, stratified by class (the validation and test splits are
  kept whole);
- ``data.imbalance: r`` makes the training and validation splits long-tailed: class ``c`` of ``C`` keeps
  ``round(n_c * r ** (-c / (C - 1)))`` of its ``n_c`` samples (at least one), so the largest and the smallest
  class differ ``r``-fold (the exponential profile of Cui et al. 2019's CIFAR-LT); the test split stays as it
  is, so its accuracy weighs every class by its own test share;
- ``data.label_noise: p`` replaces ``round(p * n)`` of the ``n`` training labels, and as many of the validation
  labels, with a different class drawn uniformly (symmetric noise; the validation split is labelled the way the
  training split is, as a user's would be); the test labels stay true.

What was done is kept in the run's data state (``fitted["hard"]``) and printed as one line when the run starts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trickbag.errors import DataError

__all__ = ["KEYS", "requested", "harden", "describe_hard"]

#: the data keys this module applies
KEYS = ("train_samples", "imbalance", "label_noise")


def requested(cfg: Any) -> list[str]:
    """The keys of :data:`KEYS` set in a data config (``data.label_noise=0`` counts as unset)."""
    return [k for k in KEYS if getattr(cfg, k, None)]


def _stratified(y: np.ndarray, keep: int, rng: np.random.Generator) -> np.ndarray:
    """``keep`` positions of ``y``: each class in proportion to its count (largest remainders), at least one."""
    classes, counts = np.unique(y, return_counts=True)
    if keep < len(classes):
        raise DataError(f"data.train_samples={keep} is fewer than the training split's {len(classes)} classes; "
                        "keep at least one sample per class")
    share = counts * keep / counts.sum()
    take = np.maximum(np.floor(share).astype(int), 1)
    for i in np.argsort(-(share - np.floor(share)), kind="stable")[: keep - int(take.sum())]:
        take[i] += 1
    while take.sum() > keep:  # the floors of 1 pushed it over: trim the largest
        take[int(np.argmax(take))] -= 1
    out = [rng.choice(np.flatnonzero(y == c), size=int(t), replace=False) for c, t in zip(classes, take)]
    return np.sort(np.concatenate(out))


def _long_tail(y: np.ndarray, num_classes: int, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Positions of ``y`` kept so that class ``c`` keeps ``round(n_c * ratio ** (-c / (C - 1)))`` (at least 1)."""
    out = []
    for c in range(num_classes):
        where = np.flatnonzero(y == c)
        if len(where) == 0:
            continue
        k = max(1, int(round(len(where) * ratio ** (-c / max(num_classes - 1, 1)))))
        out.append(rng.choice(where, size=k, replace=False))
    return np.sort(np.concatenate(out)) if out else np.zeros(0, dtype=int)


def _flip(y: torch.Tensor, positions: np.ndarray, p: float, num_classes: int,
          rng: np.random.Generator) -> int:
    """Give ``round(p * len(positions))`` of ``y[positions]`` another class, uniformly; returns how many."""
    n = int(round(p * len(positions)))
    if n == 0:
        return 0
    chosen = rng.choice(positions, size=n, replace=False)
    shift = torch.as_tensor(rng.integers(1, num_classes, size=n), dtype=y.dtype)  # never 0: always another class
    y[torch.as_tensor(chosen)] = (y[torch.as_tensor(chosen)] + shift) % num_classes
    return n


def harden(y: torch.Tensor, train: np.ndarray, val: np.ndarray, num_classes: int,
           cfg: Any) -> tuple[torch.Tensor, np.ndarray, np.ndarray, dict[str, Any]]:
    """Apply the requested keys to the class labels ``y`` and the split positions ``train`` / ``val``.

    Returns ``(labels, train, val, record)``: a copy of ``y`` with the noisy labels, the kept positions,
    and what was done (plain data for the run's state). :class:`DataError` for labels that are not classes.

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(train_samples=4, imbalance=None, label_noise=0.5, split_seed=0)
    >>> y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    >>> y2, tr, va, rec = harden(y, np.arange(8), np.array([8, 9]), 3, cfg)
    >>> len(tr), rec["train_flipped"], int((y2[tr] != y[tr]).sum()), y2[va].tolist() != y[va].tolist()
    (4, 2, 2, True)
    """
    if y.is_floating_point() or y.dim() != 1:
        raise DataError(f"data.{', data.'.join(requested(cfg))} apply to class labels (task.type=classification), "
                        "not to multi-label or regression targets")
    rng = np.random.default_rng([int(cfg.split_seed), 7919])
    yn = y.numpy()
    record: dict[str, Any] = {"seed": int(cfg.split_seed), "train_before": int(len(train))}
    if cfg.train_samples:
        if cfg.train_samples > len(train):
            raise DataError(f"data.train_samples={cfg.train_samples} is more than the training split's "
                            f"{len(train)} samples; pick at most {len(train)} (or leave it unset)")
        train = train[_stratified(yn[train], int(cfg.train_samples), rng)]
        record["train_samples"] = int(cfg.train_samples)
    if cfg.imbalance:
        train = train[_long_tail(yn[train], num_classes, float(cfg.imbalance), rng)]
        val = val[_long_tail(yn[val], num_classes, float(cfg.imbalance), rng)] if len(val) else val
        record["imbalance"] = float(cfg.imbalance)
    y = y.clone()
    if cfg.label_noise:
        record["label_noise"] = float(cfg.label_noise)
        record["train_flipped"] = _flip(y, train, float(cfg.label_noise), num_classes, rng)
        record["val_flipped"] = _flip(y, val, float(cfg.label_noise), num_classes, rng)
    record["train_after"] = int(len(train))
    record["train_counts"] = np.bincount(y[torch.as_tensor(train)].numpy(), minlength=num_classes).tolist()
    return y, train, val, record


def describe_hard(record: dict[str, Any]) -> str:
    """The one line a run prints about what :func:`harden` did."""
    parts = []
    if "train_samples" in record:
        parts.append(f"{record['train_samples']} of {record['train_before']} training samples kept (stratified)")
    if "imbalance" in record:
        c = record["train_counts"]
        parts.append(f"long tail {record['imbalance']:g}x: {max(c)} to {min(c)} training samples per class")
    if "label_noise" in record:
        parts.append(f"label noise {record['label_noise']:.0%}: {record['train_flipped']} training and "
                     f"{record['val_flipped']} validation labels replaced by another class")
    return (f"data made harder (seed data.split_seed={record['seed']}; the test split is untouched): "
            + "; ".join(parts))
