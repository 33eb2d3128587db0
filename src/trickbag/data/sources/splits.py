"""What every data source returns: :class:`DataSplits`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import Dataset

__all__ = ["DataSplits"]


@dataclasses.dataclass
class DataSplits:
    """The train / val / test datasets of a source and what the run needs to know about them."""

    train: Dataset
    val: Dataset | None
    test: Dataset | None
    num_classes: int  # the model's outputs: classes, labels (multi-label) or targets (regression)
    input_shape: tuple[int, ...]  # per sample, e.g. (1, 8, 8)
    class_counts: list[int]  # training samples per class
    classes: list[str]  # names of the classes, labels or targets
    predict_transform: Callable[[Any], torch.Tensor] | None = None  # one PIL image -> model input
    eval_train: Dataset | None = None  # the training data without augmentation
    normalise: Callable[[torch.Tensor], torch.Tensor] = lambda t: t  # what the source applied to inputs
    target_mean: list[float] | None = None  # regression: the training targets' mean and std, per target
    target_std: list[float] | None = None
    #: raw inputs (e.g. a table's feature rows ``[n, 1, F]``) -> model inputs, as the source prepared its own
    prepare: Callable[[torch.Tensor], torch.Tensor] | None = None
    #: a table's rows (header, rows, the file's name for errors) -> raw feature tensor, for ``predict`` on a CSV
    read_rows: Callable[[list[str], list[list[str]], str], torch.Tensor] | None = None
    kind: str = "image"  # "image" [C, H, W], "signal" [C, L] or "tabular" [1, F]: what model.name=auto picks for
    #: the fitted preprocessing as plain data (lists, numbers, strings): stored in a run's checkpoints and turned
    #: back into transforms by :func:`trickbag.data.sources.fitted.restore` (see that module)
    fitted: dict[str, Any] | None = None
    #: one-line warnings about the data the run prints when it starts
    notes: list[str] = dataclasses.field(default_factory=list)
    #: files left out because they cannot be read (path, reason): a run lists them in its folder (skipped_images.txt)
    skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)
