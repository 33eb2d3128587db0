"""Recipe data sources, one module each (``data.name``: digits, mnist1d, imagefolder, csv, fake, custom).

Your own data set is ``data.name: package.module:function`` (:mod:`trickbag.data.sources.custom`).

Each source returns a :class:`DataSplits` with train / val / test datasets, the number of classes,
the input shape, the per-class training counts (for class-balanced losses) and a ``predict``
transform that turns one PIL image into the model's input (for ``trickbag predict``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from trickbag.data.sources.custom import custom
from trickbag.data.sources.digits import digits
from trickbag.data.sources.fake import fake
from trickbag.data.sources.fitted import describe, restore
from trickbag.data.sources.hard import requested
from trickbag.data.sources.images import imagefolder
from trickbag.data.sources.memory import BatchGather, Collated, TensorDataset, collate, random_shift
from trickbag.data.sources.mnist1d import cache_dir, mnist1d
from trickbag.data.sources.splits import DataSplits
from trickbag.data.sources.table import csv_table
from trickbag.errors import DataError

__all__ = ["DataSplits", "build_data", "TensorDataset", "BatchGather", "Collated", "collate", "random_shift",
           "cache_dir", "SOURCES", "TASK_AWARE", "restore"]

#: ``data.name`` -> source function ``source(data_config) -> DataSplits`` (classification data)
SOURCES: dict[str, Callable[[Any], DataSplits]] = {
    "digits": digits,
    "mnist1d": mnist1d,
    "fake": fake,
    "csv": csv_table,  # (reads the task's labels: see TASK_AWARE)
    "imagefolder": imagefolder,
}


#: sources that read the task's labels themselves (every other one has class labels)
TASK_AWARE: dict[str, Callable[[Any, Any], DataSplits]] = {"csv": csv_table}


def build_data(cfg: Any, task: Any = None, fitted: dict[str, Any] | None = None) -> DataSplits:
    """Build the datasets a :class:`trickbag.config.DataConfig` describes, for the recipe's ``task`` section.

    ``fitted``: a preprocessing state a run stored (:attr:`DataSplits.fitted`): the data are encoded
    with it, never re-fitted from the files."""
    kind = getattr(task, "type", "classification")
    if ":" in cfg.name:
        splits = custom(cfg, task)
    elif cfg.name == "csv":
        splits = csv_table(cfg, task, fitted)
    elif cfg.name in TASK_AWARE:
        splits = TASK_AWARE[cfg.name](cfg, task)
    elif cfg.name in SOURCES:
        if kind != "classification":
            raise DataError(f"data.name={cfg.name!r} has class labels; task.type={kind} needs data.name=csv or your "
                            "own package.module:function source")
        if cfg.root and cfg.name in ("digits", "mnist1d", "fake"):
            raise DataError(f"data.root is not used by data.name={cfg.name!r}; remove it or pick imagefolder/csv")
        splits = imagefolder(cfg, fitted) if cfg.name == "imagefolder" else SOURCES[cfg.name](cfg)
    else:
        raise DataError(f"data.name={cfg.name!r} is not a data source; allowed: {', '.join(SOURCES)}, "
                        "or package.module:function")
    if requested(cfg) and "hard" not in (splits.fitted or {}):
        raise DataError(f"data.{', data.'.join(requested(cfg))}: the {cfg.name!r} source does not support "
                        "them; they apply to the in-memory sources digits, mnist1d, csv and fake")
    n_train = len(splits.train)  # type: ignore[arg-type]
    if cfg.drop_last and cfg.batch_size > n_train:
        raise DataError(
            f"data.batch_size={cfg.batch_size} is larger than the training set ({n_train} samples) with "
            "data.drop_last=true, so no batch would be made; lower the batch size or set drop_last=false"
        )
    if kind == "classification" and splits.num_classes < 2:
        raise DataError(f"data {cfg.name!r} has {splits.num_classes} class; classification needs at least 2")
    if fitted is not None:  # the model's outputs are the run's, whatever classes these files hold
        splits.num_classes, splits.classes = int(fitted["num_classes"]), list(fitted["classes"])
    splits.fitted = dict(fitted) if fitted is not None else describe(splits, cfg, task)
    return splits


def data_fingerprint(cfg: Any) -> str:
    """A short hash of the data settings (used to name caches)."""
    return hashlib.sha1(repr(sorted(cfg.model_dump().items())).encode()).hexdigest()[:10]
