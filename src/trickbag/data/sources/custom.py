"""Your own data set from a recipe: ``data.name: package.module:function``.

The function is imported (it runs that module's code) and called with the recipe's ``data``
section; it returns a mapping::

    def my_data(cfg):                      # cfg: the recipe's DataConfig (cfg.root, cfg.batch_size, ...)
        return {
            "train": train_dataset,        # torch Datasets of (x, y) samples; x: a tensor of one shape
            "val": val_dataset,            # or None
            "test": test_dataset,          # or None
            "classes": ["cat", "dog"],     # classification: class names (or "num_classes": 2)
        }

``y`` is a class index (``task.type=classification``), a float tensor of 0/1 per label
(``multilabel``, name them with ``"labels"``) or a float tensor of numbers (``regression``, name
them with ``"targets"``; standardise them yourself: they are used as they are). ``"eval_train"``
(the training data without augmentation) is optional.
"""

from __future__ import annotations

from typing import Any

import torch

from trickbag.data.sources.splits import DataSplits
from trickbag.errors import DataError

__all__ = ["custom"]


def _first(ds: Any, spec: str, split: str) -> tuple[Any, Any]:
    try:
        x, y = ds[0][:2]
    except Exception as exc:  # the user's dataset: any error means it cannot be used
        raise DataError(f"data.name={spec!r}: the first {split} sample cannot be read as (x, y): "
                        f"{type(exc).__name__}: {exc}") from None
    if not isinstance(x, torch.Tensor):
        raise DataError(f"data.name={spec!r}: samples must be (tensor, label); the {split} input is a "
                        f"{type(x).__name__}")
    return x, y


def _names(out: dict[str, Any], y: Any, task: str, spec: str) -> list[str]:
    if task == "classification":
        if "classes" in out:
            return [str(c) for c in out["classes"]]
        if "num_classes" in out:
            return [str(i) for i in range(int(out["num_classes"]))]
        raise DataError(f"data.name={spec!r} must return 'classes' (class names) or 'num_classes' for classification")
    key = "labels" if task == "multilabel" else "targets"
    width = int(torch.as_tensor(y).numel())
    names = [str(n) for n in out.get(key, [f"{key[:-1]}{i}" for i in range(width)])]
    if len(names) != width:
        raise DataError(f"data.name={spec!r}: {key} names {len(names)} outputs, the samples have {width}")
    return names


def custom(cfg: Any, task: Any = None) -> DataSplits:
    """The train / val / test datasets ``package.module:function`` returns (see the module docstring)."""
    from trickbag.models import import_callable

    spec, kind = cfg.name, getattr(task, "type", "classification")
    out = import_callable(spec, "data.name")(cfg)
    if not isinstance(out, dict) or out.get("train") is None:
        raise DataError(f"data.name={spec!r} must return a dict with 'train' (and 'val', 'test', 'classes'), "
                        f"got {type(out).__name__}")
    if len(out["train"]) == 0:
        raise DataError(f"data.name={spec!r} returned an empty training set")
    x, y = _first(out["train"], spec, "train")
    names = _names(out, y, kind, spec)
    counts = [0] * len(names)
    targets = getattr(out["train"], "targets", None)
    if kind == "classification" and targets is not None:
        counts = torch.bincount(torch.as_tensor(list(targets)), minlength=len(names)).tolist()
    shape = tuple(x.shape)
    return DataSplits(
        train=out["train"], val=out.get("val"), test=out.get("test"), num_classes=len(names), input_shape=shape,
        class_counts=counts, classes=names, eval_train=out.get("eval_train"),
        kind={1: "tabular", 2: "signal"}.get(len(shape), "image"),
    )
