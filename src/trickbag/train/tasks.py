"""The ``Task`` seam: what the trainer needs to know about the prediction problem.

A task gives the trainer its default training loss, the per-epoch training statistic, the
evaluation metrics (from torchmetrics) and what ``trickbag predict`` prints; the trainer names no
loss and no metric itself. Three tasks:

* :class:`Classification` — one class per sample; cross-entropy; accuracy, top-5 (6 classes or
  more), macro F1, and at test also macro AUROC, per-class accuracy and the confusion matrix;
* :class:`Multilabel` — any number of labels per sample (targets ``[N, L]`` of 0/1);
  BCE-with-logits; macro F1 at threshold 0.5, mAP (macro average precision), label accuracy;
* :class:`Regression` — numbers (targets ``[N, T]``, standardised by the data source with the
  training mean and std, which the task keeps); MSE or Huber on the standardised scale; MAE,
  RMSE and R² in the data's own units.

Every metric dict also holds ``loss`` (the task's evaluation loss, mean over samples) and ``n``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["Task", "Classification", "Multilabel", "Regression", "EvalMetrics", "make_task", "TASKS"]


class EvalMetrics:
    """Accumulate a task's evaluation metrics over batches: :meth:`update`, then :meth:`compute`.

    ``loss`` is summed in float64 on the device; the other metrics are torchmetrics objects
    (synchronised across processes by torchmetrics when a process group is running).
    """

    def __init__(self, loss_sum: Callable[[Tensor, Tensor], Tensor], metrics: dict[str, Any] | Callable[[Tensor], dict],
                 transform: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]], device: torch.device) -> None:
        self.loss_sum, self.transform, self.device = loss_sum, transform, device
        # a callable: made from the first output (a task that learns its number of classes from the model)
        self._make = metrics if callable(metrics) else None
        self.metrics = {} if callable(metrics) else {k: m.to(device) for k, m in metrics.items()}
        self.sums = torch.zeros(2, dtype=torch.float64, device=device)  # loss sum, samples

    def update(self, output: Tensor, target: Tensor) -> None:
        output = output.float()
        if self._make is not None:
            self.metrics = {k: m.to(self.device) for k, m in self._make(output).items()}
            self._make = None
        self.sums[0] += self.loss_sum(output, target).double()
        self.sums[1] += target.shape[0]
        if self.metrics:
            out, tgt = self.transform(output, target)
            for m in self.metrics.values():
                m.update(out, tgt)

    def compute(self) -> dict[str, Any]:
        """``{"loss", "n", <metric>...}``: floats; tensors for per-class values (``per_class_acc``, ``confusion``)."""
        sums = self.sums
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            sums = sums.clone()
            torch.distributed.all_reduce(sums)
        loss, n = sums.tolist()
        out: dict[str, Any] = {"loss": loss / n if n else float("nan"), "n": n}
        for name, m in self.metrics.items():
            value = m.compute() if n else torch.tensor(float("nan"))
            out[name] = float(value) if value.numel() == 1 else value.detach().cpu()
        return out


class Task:
    """Base class of the tasks (see the module docstring)."""

    name: ClassVar[str] = ""
    #: default ``train.monitor`` and its mode
    monitor: ClassVar[tuple[str, str]] = ("val/loss", "min")
    #: name of the per-epoch training statistic (``train/<name>``), or None
    train_stat_name: ClassVar[str | None] = None

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        """The default training loss (mean over the batch)."""
        raise NotImplementedError

    def eval_loss_sum(self, output: Tensor, target: Tensor) -> Tensor:
        """Evaluation loss summed over the batch."""
        raise NotImplementedError

    def train_stat(self, output: Tensor, target: Tensor) -> Tensor | None:
        """A 0-d count summed over the epoch and divided by the samples (``train/<train_stat_name>``);
        None when it is undefined for this batch (mixed soft targets)."""
        return None

    def loss_count(self, output: Tensor, target: Tensor) -> int | Tensor:
        """How many terms the training loss of this batch averages over: the samples by default; a task whose
        loss averages over something else (valid tokens, labelled elements) returns that count (an int, or a
        0-d tensor to avoid a host sync). Accumulation weights every micro-batch by it, so that micro-batches
        of different sizes add up to the gradient of the one big batch."""
        return int(target.shape[0])

    def metric_names(self, *, test: bool = False) -> list[str]:
        """Names of the float metrics :meth:`metrics` reports (besides ``loss`` and ``n``)."""
        raise NotImplementedError

    def metrics(self, device: torch.device, *, test: bool = False, extra: Sequence[str] = ()) -> EvalMetrics:
        """A fresh accumulator; ``extra`` names test-only metrics wanted anyway (the monitored one)."""
        raise NotImplementedError

    def describe(self, output: Tensor, top: int = 5) -> list[list[tuple[str, float]]]:
        """Per sample, what ``predict`` prints: (class or label or target name, probability or value)."""
        raise NotImplementedError

    def metadata(self) -> dict[str, Any]:
        """What a checkpoint stores to rebuild this task without the data."""
        return {"type": self.name}


def _identity(output: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    return output, target


@dataclasses.dataclass
class Classification(Task):
    """Single-label classification over ``num_classes`` classes (targets: class indices ``[N]``)."""

    num_classes: int | None = None  # None: the width of the model's output
    classes: list[str] | None = None
    name: ClassVar[str] = "classification"
    monitor: ClassVar[tuple[str, str]] = ("val/acc", "max")
    train_stat_name: ClassVar[str | None] = "acc"

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output, target)

    def eval_loss_sum(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output, target, reduction="sum")

    def train_stat(self, output: Tensor, target: Tensor) -> Tensor | None:
        if target.dim() != 1:  # mixed / soft targets: accuracy is undefined
            return None
        return (output.detach().argmax(1) == target).sum()

    def metric_names(self, *, test: bool = False, num_classes: int | None = None) -> list[str]:
        k = num_classes or self.num_classes or 0
        names = ["acc"] + (["top5"] if k >= 6 else []) + ["f1"]
        return names + (["auroc"] if test else [])

    def metrics(self, device: torch.device, *, test: bool = False, extra: Sequence[str] = ()) -> EvalMetrics:
        def make(output: Tensor) -> dict[str, Any]:
            from torchmetrics import classification as C

            k = self.num_classes or int(output.shape[1])
            wanted = set(self.metric_names(test=test, num_classes=k)) | set(extra)
            wanted |= {"per_class_acc", "confusion"} if test else set()
            table = {
                "acc": lambda: C.MulticlassAccuracy(k, average="micro"),
                "top5": lambda: C.MulticlassAccuracy(k, top_k=5, average="micro"),
                "f1": lambda: C.MulticlassF1Score(k, average="macro"),
                "auroc": lambda: C.MulticlassAUROC(k, average="macro"),
                "per_class_acc": lambda: C.MulticlassAccuracy(k, average=None),
                "confusion": lambda: C.MulticlassConfusionMatrix(k),
            }
            return {name: new() for name, new in table.items() if name in wanted}

        return EvalMetrics(self.eval_loss_sum, make, _identity, device)

    def describe(self, output: Tensor, top: int = 5) -> list[list[tuple[str, float]]]:
        probs = torch.softmax(output.float(), dim=1)
        p, idx = probs.topk(min(top, probs.shape[1]), dim=1)
        names = self.classes or [str(i) for i in range(probs.shape[1])]
        return [[(names[i] if i < len(names) else str(i), float(v)) for v, i in zip(pr.tolist(), ix.tolist())]
                for pr, ix in zip(p, idx)]

    def metadata(self) -> dict[str, Any]:
        return {"type": self.name, "num_classes": self.num_classes, "classes": self.classes}


@dataclasses.dataclass
class Multilabel(Task):
    """Multi-label classification: ``num_labels`` independent yes/no labels (targets ``[N, L]`` of 0/1)."""

    num_labels: int
    labels: list[str] | None = None
    name: ClassVar[str] = "multilabel"
    monitor: ClassVar[tuple[str, str]] = ("val/map", "max")

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(output, target.to(output.dtype))

    def eval_loss_sum(self, output: Tensor, target: Tensor) -> Tensor:
        per = F.binary_cross_entropy_with_logits(output, target.to(output.dtype), reduction="none")
        return per.mean(dim=1).sum()

    def metric_names(self, *, test: bool = False) -> list[str]:
        return ["map", "f1", "acc"]

    def metrics(self, device: torch.device, *, test: bool = False, extra: Sequence[str] = ()) -> EvalMetrics:
        from torchmetrics import classification as C

        k = self.num_labels
        chosen = {
            "f1": C.MultilabelF1Score(k, average="macro"),
            "map": C.MultilabelAveragePrecision(k, average="macro"),
            "acc": C.MultilabelAccuracy(k, average="micro"),
        }
        return EvalMetrics(self.eval_loss_sum, chosen, lambda o, t: (o, t.round().long()), device)

    def describe(self, output: Tensor, top: int = 5) -> list[list[tuple[str, float]]]:
        probs = torch.sigmoid(output.float())
        names = self.labels or [str(i) for i in range(self.num_labels)]
        return [[(names[i], float(v)) for i, v in enumerate(row.tolist())] for row in probs]

    def metadata(self) -> dict[str, Any]:
        return {"type": self.name, "num_labels": self.num_labels, "labels": self.labels}


@dataclasses.dataclass
class Regression(Task):
    """Regression of ``num_targets`` numbers; the data source standardised the targets with
    ``target_mean`` / ``target_std`` (training split), the metrics undo it."""

    num_targets: int = 1
    target_mean: Sequence[float] = (0.0,)
    target_std: Sequence[float] = (1.0,)
    loss_name: str = "mse"
    huber_delta: float = 1.0
    targets: list[str] | None = None
    name: ClassVar[str] = "regression"
    monitor: ClassVar[tuple[str, str]] = ("val/loss", "min")

    def _fit(self, output: Tensor, target: Tensor) -> Tensor:
        return target.to(output.dtype).reshape(output.shape)

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        t = self._fit(output, target)
        if self.loss_name == "huber":
            return F.huber_loss(output, t, delta=self.huber_delta)
        return F.mse_loss(output, t)

    def eval_loss_sum(self, output: Tensor, target: Tensor) -> Tensor:
        t = self._fit(output, target)
        if self.loss_name == "huber":
            per = F.huber_loss(output, t, delta=self.huber_delta, reduction="none")
        else:
            per = F.mse_loss(output, t, reduction="none")
        return per.reshape(per.shape[0], -1).mean(dim=1).sum()

    def to_units(self, values: Tensor) -> Tensor:
        """Standardised values ``[N, T]`` back in the data's units."""
        mean = torch.tensor(list(self.target_mean), dtype=values.dtype, device=values.device)
        std = torch.tensor(list(self.target_std), dtype=values.dtype, device=values.device)
        return values.reshape(values.shape[0], -1) * std + mean

    def metric_names(self, *, test: bool = False) -> list[str]:
        return ["r2", "mae", "rmse"]

    def metrics(self, device: torch.device, *, test: bool = False, extra: Sequence[str] = ()) -> EvalMetrics:
        from torchmetrics import regression as R

        k = self.num_targets
        chosen = {"mae": R.MeanAbsoluteError(num_outputs=k), "rmse": R.MeanSquaredError(squared=False, num_outputs=k),
                  "r2": R.R2Score(multioutput="uniform_average") if k > 1 else R.R2Score()}

        def units(o: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
            o, t = self.to_units(o), self.to_units(self._fit(o, t))
            return (o, t) if k > 1 else (o[:, 0], t[:, 0])

        return _MeanOfOutputs(self.eval_loss_sum, chosen, units, device)

    def describe(self, output: Tensor, top: int = 5) -> list[list[tuple[str, float]]]:
        values = self.to_units(output.float())
        names = self.targets or [f"target{i}" for i in range(self.num_targets)]
        return [[(names[i], float(v)) for i, v in enumerate(row.tolist())] for row in values]

    def metadata(self) -> dict[str, Any]:
        return {"type": self.name, "num_targets": self.num_targets, "target_mean": list(self.target_mean),
                "target_std": list(self.target_std), "loss": self.loss_name, "huber_delta": self.huber_delta,
                "targets": self.targets}


class _MeanOfOutputs(EvalMetrics):
    """Per-output metrics (MAE, RMSE of several targets) averaged into one number."""

    def compute(self) -> dict[str, Any]:
        out = super().compute()
        return {k: (float(v.float().mean()) if isinstance(v, Tensor) else v) for k, v in out.items()}


TASKS: dict[str, type[Task]] = {"classification": Classification, "multilabel": Multilabel, "regression": Regression}


def make_task(metadata: dict[str, Any]) -> Task:
    """Rebuild a task from :meth:`Task.metadata` (as stored in a checkpoint).

    >>> make_task({"type": "classification", "num_classes": 3}).metric_names()
    ['acc', 'f1']
    """
    meta = dict(metadata)
    kind = meta.pop("type", "classification")
    if kind not in TASKS:
        raise ValueError(f"task type {kind!r} is unknown; allowed: {', '.join(TASKS)}")
    if kind == "regression" and "loss" in meta:
        meta["loss_name"] = meta.pop("loss")
    return TASKS[kind](**meta)
