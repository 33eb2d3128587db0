"""A run's fitted preprocessing as plain data: what a data source learned, stored in every checkpoint.

:func:`build_data` fills :attr:`DataSplits.fitted` once, when a run's data are first built; the run's
checkpoints keep it under ``"preprocess"`` (lists, numbers and strings only, so
``torch.load(weights_only=True)`` reads it), and everything after uses it instead of fitting again:
a resumed run, ``trickbag eval``/``predict``/``export``. Keys:

* ``version``, ``source`` (``csv``, ``imagefolder``, ``digits``, ``mnist1d``, ``fake`` or ``custom``),
  ``task`` (classification, multilabel, regression), ``kind`` (image, signal, tabular), ``input_shape``,
  ``num_classes`` (the data's outputs), ``classes`` (class, label or target names), ``target_mean`` and
  ``target_std`` (regression targets' scaling, else None);
* ``table`` (CSV): ``features``, ``labels``, ``columns`` (:mod:`~trickbag.data.sources.table_state`),
  ``mean``/``std`` of the encoded features;
* ``image`` (image folders): mode, training ``size``, short side ``resize``, centre ``crop``, ``mean``/``std``
  (:func:`~trickbag.data.sources.images.eval_image_state`);
* ``normalise`` (in-memory sources): the per-channel ``mean``/``std`` the source applied.

:func:`restore` turns the state back into a :class:`DataSplits` without reading any data: no splits,
but the input shape, classes, the predict transform of an image and a CSV's row reader and encoder.
"""

from __future__ import annotations

from typing import Any

import torch

from trickbag.data.sources.splits import DataSplits
from trickbag.errors import DataError

__all__ = ["STATE_VERSION", "describe", "restore", "labelled_table"]

#: the layout of the stored state; a later layout keeps reading this one
STATE_VERSION = 1


def describe(splits: DataSplits, cfg: Any, task: Any) -> dict[str, Any]:
    """The complete state of freshly built ``splits`` (a source's own part plus what every run needs)."""
    state = dict(splits.fitted or {})
    state.setdefault("source", "custom" if ":" in cfg.name else cfg.name)
    state.update(
        version=STATE_VERSION, task=getattr(task, "type", "classification"), kind=splits.kind,
        input_shape=[int(s) for s in splits.input_shape], num_classes=int(splits.num_classes),
        classes=[str(c) for c in splits.classes], target_mean=splits.target_mean, target_std=splits.target_std,
    )
    return state


def restore(state: dict[str, Any]) -> DataSplits:
    """A :class:`DataSplits` from a stored state: no datasets (an empty training set), everything predict needs.

    >>> s = restore({"version": 1, "source": "fake", "task": "classification", "kind": "image",
    ...              "input_shape": [1, 4, 4], "num_classes": 3, "classes": ["a", "b", "c"]})
    >>> s.input_shape, s.classes, len(s.train), s.predict_transform is None
    ((1, 4, 4), ['a', 'b', 'c'], 0, True)
    """
    from trickbag.data.sources.memory import TensorDataset

    if not isinstance(state, dict) or int(state.get("version", 0)) > STATE_VERSION:
        raise DataError("the checkpoint's stored preprocessing is of a newer trickbag; update trickbag to use it")
    shape = tuple(int(s) for s in state["input_shape"])
    n = int(state["num_classes"])
    splits = DataSplits(
        train=TensorDataset(torch.zeros((0, *shape)), torch.zeros(0, dtype=torch.long)), val=None, test=None,
        num_classes=n, input_shape=shape, class_counts=[0] * n, classes=list(state["classes"]), kind=state["kind"],
        target_mean=state.get("target_mean"), target_std=state.get("target_std"), fitted=state,
    )
    if "table" in state:
        from trickbag.data.sources.table_state import TableEncoder, read_cells

        t = state["table"]
        splits.prepare = TableEncoder(t["columns"], t["mean"], t["std"])
        splits.read_rows = lambda head, body, where: read_cells(t["columns"], head, body, where)
    elif "image" in state:
        from trickbag.data.sources.images import image_predict

        splits.predict_transform = image_predict(state["image"])
    elif state["source"] == "digits":
        from trickbag.data.sources.digits import digits_predict

        splits.predict_transform = digits_predict(state["normalise"])
    return splits


def labelled_table(state: dict[str, Any], path: str) -> Any:
    """A labelled CSV file (``eval --data``) as one dataset, encoded with the stored state (nothing fitted)."""
    from trickbag.data.sources.memory import TensorDataset
    from trickbag.data.sources.table import label_table, number_targets, read_csv, stored_classes
    from trickbag.data.sources.table_state import TableEncoder, read_cells

    t = state["table"]
    where = f"--data {path!r}"
    header, rows = read_csv(path, where)
    x = TableEncoder(t["columns"], t["mean"], t["std"])(read_cells(t["columns"], header, rows, str(path)))
    table = label_table(header, rows, t["labels"], where)
    if state["task"] == "classification":
        y = stored_classes(where, t["labels"][0], [r[0] for r in table], list(state["classes"]))
    else:
        y = number_targets(where, t["labels"], table, state["task"])
        if state.get("target_mean") is not None:
            y = (y - torch.tensor(state["target_mean"])) / torch.tensor(state["target_std"])
    return TensorDataset(x, y)
