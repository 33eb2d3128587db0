"""The core sections of a recipe (everything but ``tricks``, whose sections live in the trick modules).

Each key carries its default and, in a trailing comment, its one-line help; ``trickbag recipes --keys``
and docs/recipes.md are generated from these classes.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = [
    "Section",
    "TrickSection",
    "needs_items",
    "BinConfig",
    "DataConfig",
    "TaskConfig",
    "ModelConfig",
    "OptimConfig",
    "ScheduleConfig",
    "TrainConfig",
    "RunConfig",
    "LogConfig",
    "DistConfig",
]


def _accepts(annotation: Any, kind: type) -> bool:
    """Whether ``annotation`` (``int``, ``bool | int``, ``Optional[float]``, ...) lets a value of ``kind`` through."""
    if annotation is kind or annotation is Any:
        return True
    return any(_accepts(a, kind) for a in typing.get_args(annotation))


def expand_home(v: Any) -> Any:
    """``~`` and ``~user`` at the start of a path expanded, as a shell would."""
    return os.path.expanduser(v) if isinstance(v, str) else v


class Section(BaseModel):
    """A recipe section: unknown keys are refused, assignments are validated.

    Stricter than pydantic's defaults where YAML makes mistakes easy: ``true`` is not a number
    (``train.epochs=true`` is refused, not read as 1), and numbers must be finite (``.inf``, ``.nan``).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())

    @field_validator("*", mode="before")
    @classmethod
    def _strict_numbers(cls, v: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is None:
            return v
        if isinstance(v, bool) and not _accepts(field.annotation, bool):
            raise ValueError("true/false is not a number here; give a number")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v


class TrickSection(Section):
    """The recipe section of one trick (``tricks.<name>``): off unless ``enabled``."""

    enabled: bool = False


def needs_items(v: list, info: Any, what: str) -> list:
    """Validator helper: an enabled trick's list must not be empty."""
    if info.data.get("enabled") and not v:
        raise ValueError(f"list at least one {what} when the trick is enabled")
    return v


# --------------------------------------------------------------------------- sections
class BinConfig(Section):
    """How one CSV feature column is binned (``trickbag.extras.tabular.bin_feature``) before it reaches the model."""

    method: Literal["width", "quantile", "tree"] = "quantile"  # equal width, equal frequency, or decision-tree splits on the label  # noqa: E501 (a key's help is the comment on its line)
    n_bins: int = Field(10, ge=1, le=1000)  # at most this many bins (ties / tree leaves may give fewer); n_bins + 1 inputs  # noqa: E501 (a key's help is the comment on its line)


class DataConfig(Section):
    """Where the data comes from and how it is batched."""

    name: str = "digits"  # digits, mnist1d, imagefolder, csv, fake, or your own package.module:function
    root: str | None = None  # folder (imagefolder) or file (csv)
    batch_size: int = Field(64, ge=1, le=2**24)  # samples per training batch
    eval_batch_size: int | None = Field(None, ge=1, le=2**24)  # default: 4 x batch_size
    num_workers: int = Field(0, ge=0)  # DataLoader worker processes (0: load in the training process)
    pin_memory: Literal["auto"] | bool = "auto"  # auto: on when training on CUDA
    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)  # held-out test split (digits, csv, fake)
    val_fraction: float = Field(0.1, ge=0.0, lt=1.0)  # validation share of what remains
    split_seed: int = Field(0, ge=0, le=2**32 - 1)  # fixed so every run sees the same split
    drop_last: bool = False  # drop each epoch's last, smaller training batch
    augment: bool = True  # the source's standard training augmentation
    image_size: int | None = Field(None, ge=8)  # imagefolder: train crop size
    eval_image_size: int | None = Field(None, ge=8)  # imagefolder: test size (FixRes)
    mean: list[float] | None = None  # imagefolder normalisation (default ImageNet's)
    max_corrupt: float = Field(0.01, ge=0.0, le=1.0)  # imagefolder: largest share of unreadable images left out (listed in skipped_images.txt); more stops the run before it starts  # noqa: E501 (a key's help is the comment on its line)
    std: list[float] | None = None  # imagefolder normalisation std, one per channel (default ImageNet's)
    label_column: str | list[str] = "label"  # csv: the label column; multilabel / several regression targets: a list
    feature_columns: list[str] | None = None  # csv: default all but the label
    missing_labels: list[str] | None = None  # csv: label cells meaning "no label" (default: empty; regression/multilabel also NA, N/A, NaN, null, None, ?, -)  # noqa: E501 (a key's help is the comment on its line)
    drop_unlabelled: bool = False  # csv: train on the labelled rows, saying how many were left out (default: a missing label is refused)  # noqa: E501 (a key's help is the comment on its line)
    num_samples: int | None = Field(None, ge=10)  # fake / mnist1d: samples to generate
    # harder data where a trick can show (digits, mnist1d, csv, fake; seeded by split_seed, test split untouched):
    train_samples: int | None = Field(None, ge=2)  # keep this many training samples, stratified by class
    imbalance: float | None = Field(None, ge=1.0)  # long tail: the largest training class this many times the smallest
    label_noise: float = Field(0.0, ge=0.0, lt=1.0)  # share of training/validation labels swapped for another class
    num_classes: int | None = Field(None, ge=2)  # fake
    shape: list[int] | None = None  # fake: per-sample shape, e.g. [3, 32, 32]
    # csv: {feature column: {method, n_bins}}; edges fitted on the training split only, each binned column
    # replaced in place by one-hot bin indicators plus a last "missing" indicator (empty or NaN cells allowed)
    bins: dict[str, BinConfig] = Field(default_factory=dict)  # csv: {column: {method, n_bins}} binned into one-hot indicators  # noqa: E501 (a key's help is the comment on its line)

    @field_validator("root")
    @classmethod
    def _root_home(cls, v: str | None) -> str | None:
        return expand_home(v)

    @field_validator("name")
    @classmethod
    def _source_name(cls, v: str) -> str:
        builtin = ("digits", "mnist1d", "imagefolder", "csv", "fake")
        if v in builtin or re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", v):
            return v
        close = difflib.get_close_matches(v, builtin, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"{v!r} is not a data source{hint}; allowed: {', '.join(builtin)}, or package.module:function")

    @field_validator("bins")
    @classmethod
    def _bins_for_csv(cls, v: dict[str, BinConfig], info: Any) -> dict[str, BinConfig]:
        if v and info.data.get("name", "csv") != "csv":
            raise ValueError(f"binning applies to data.name=csv only, not {info.data.get('name')!r}")
        if any(not k.strip() for k in v):
            raise ValueError("every key must be a CSV column name")
        return v

    @field_validator("missing_labels", "drop_unlabelled")
    @classmethod
    def _labels_for_csv(cls, v: Any, info: Any) -> Any:
        if v not in (None, False) and info.data.get("name", "csv") != "csv":
            raise ValueError(f"applies to data.name=csv only, not {info.data.get('name')!r}")
        return v

    @field_validator("std")
    @classmethod
    def _positive_std(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and any(s <= 0 for s in v):
            raise ValueError("every std must be > 0")
        return v

    @field_validator("mean", "std")
    @classmethod
    def _one_per_channel(cls, v: list[float] | None) -> list[float] | None:
        # images are read as RGB or grayscale: any other count would be broadcast silently
        if v is not None and len(v) not in (1, 3):
            raise ValueError("give 3 values (RGB images) or 1 (grayscale)")
        return v


class TaskConfig(Section):
    """What the model predicts: one class per sample, several labels, or numbers (loss, metrics, predict output)."""

    type: Literal["classification", "multilabel", "regression"] = "classification"  # one class per sample; several 0/1 labels; or numbers  # noqa: E501 (a key's help is the comment on its line)
    loss: Literal["auto", "mse", "huber"] = "auto"  # regression: mse (auto) or huber; the other tasks: auto
    huber_delta: float = Field(1.0, gt=0.0)  # huber: where the loss turns linear, in standardised target units


class ModelConfig(Section):
    """Which network to train."""

    name: str = "auto"  # auto (fits the data), built-in, torchvision name, or 'module:function' (runs your code)
    num_classes: int | None = Field(None, ge=2)  # default: taken from the data
    kwargs: dict[str, Any] = Field(default_factory=dict)  # passed to the model constructor
    weights: str | None = None  # local state_dict/checkpoint to start from (partial load)

    @field_validator("weights")
    @classmethod
    def _weights_home(cls, v: str | None) -> str | None:
        return expand_home(v)


class OptimConfig(Section):
    """Optimizer and its hyper-parameters."""

    # The names are those of trickbag.optim.optimizers (one module per optimizer family): the recipe's `optim`
    # (trickbag.recipe.OptimSection) narrows `name` to them.
    name: str = "sgd"  # the optimizer (muon: Muon on hidden matrices, AdamW on the rest; schedulefree_*: with schedule.name=none)  # noqa: E501 (a key's help is the comment on its line)
    lr: float = Field(0.1, gt=0.0)  # peak learning rate (after warmup)
    momentum: float = Field(0.9, ge=0.0, lt=1.0)  # sgd, rmsprop
    nesterov: bool = True  # sgd
    weight_decay: float = Field(5e-4, ge=0.0)  # L2 penalty on the weights (decoupled for adamw)
    betas: tuple[float, float] = (0.9, 0.999)  # adam, adamw
    eps: float = Field(1e-8, gt=0.0)  # adam / adamw / rmsprop: added to the denominator
    muon_momentum: float = Field(0.95, ge=0.0, lt=1.0)  # muon: momentum of the Muon part (Nesterov)
    adamw_params: list[str] = Field(default_factory=list)  # muon: more parameter names (fnmatch patterns) for AdamW
    fused: bool = False  # adam, adamw, sgd: torch's fused kernel, one per update for all parameters (faster on CPU and CUDA; the same update up to rounding); the other optimizers refuse it  # noqa: E501 (a key's help is the comment on its line)
    lookahead_k: int = Field(0, ge=0)  # Lookahead around the optimizer: sync the slow weights every k updates (0: off)
    lookahead_alpha: float = Field(0.5, gt=0.0, le=1.0)  # Lookahead: step of the slow weights toward the fast ones

    @field_validator("betas")
    @classmethod
    def _betas_range(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not all(0.0 <= b < 1.0 for b in v):
            raise ValueError("each beta must be in [0, 1)")
        return v


class ScheduleConfig(Section):
    """Learning-rate schedule, stepped once per optimizer update (plateau: once per epoch)."""

    # The keys every schedule has; each schedule's own keys are in its subclass, in its module under
    # trickbag.optim.schedules, and the recipe's `schedule` is the union of those, told apart by `name`.
    name: str = "cosine"  # the LR curve (none: no schedule, e.g. for a schedule-free optimizer)
    warmup_epochs: float = Field(0.0, ge=0.0)  # linear warmup length, in epochs (fractions allowed)


class TrainConfig(Section):
    """The loop: length, precision, accumulation, seeding, selection of the best checkpoint."""

    epochs: int = Field(10, ge=1)  # passes over the training data
    precision: Literal["32", "bf16", "16"] = "32"  # "16" = fp16 autocast + GradScaler (CUDA)
    accumulate: int = Field(1, ge=1)  # loader batches (of data.batch_size) per optimizer update
    micro_batch_size: Literal["auto"] | int | None = None  # split each loader batch into micro-batches of at most this many samples (the update's gradient stays the whole batch's); auto: the whole batch until it runs out of GPU memory, then halved and the update redone; null: off  # noqa: E501 (a key's help is the comment on its line)
    clip: float | None = Field(None, gt=0.0)  # max global grad norm (None: off)
    seed: int = Field(0, ge=0, le=2**32 - 1)  # seeds weights, order, augmentation and tricks
    deterministic: bool = False  # deterministic algorithms (torch + cuDNN): bit-identical reruns, slower on GPUs
    benchmark: bool = False  # cudnn.benchmark
    device: str = "auto"  # auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N, mps
    threads: Literal["auto"] | int | None = "auto"  # CPU intra-op threads: auto (OMP_NUM_THREADS if set, else one per core other processes leave free, re-checked every epoch; with deterministic: OMP_NUM_THREADS or the cores), a number, or null (torch's default)  # noqa: E501 (a key's help is the comment on its line)
    monitor: str = "auto"  # metric for best.pt and early stopping, e.g. val/acc, val/f1, val/loss; auto: the task's
    mode: Literal["auto", "max", "min"] = "auto"  # auto: min for losses and errors (loss, mae, rmse), else max
    early_stopping_patience: int | None = Field(None, ge=1)  # epochs without improvement
    early_stopping_min_delta: float = Field(0.0, ge=0.0)  # smallest change of the monitored metric that counts as better  # noqa: E501 (a key's help is the comment on its line)
    eval_every: int = Field(1, ge=1)  # epochs between validations
    checkpoint_every_steps: int | None = Field(None, ge=1)  # extra mid-epoch checkpoints
    keep_checkpoints: int = Field(3, ge=1)  # step checkpoints kept for fallback on resume
    plugins: list[str] = Field(default_factory=list)  # your own plug-ins: package.module:Name (a Plugin class or a function returning plug-ins), run after all others  # noqa: E501 (a key's help is the comment on its line)
    nonfinite: Literal["skip", "stop"] = "skip"  # what a NaN/Inf loss or gradient does
    max_nonfinite: int = Field(5, ge=1)  # stop after this many skipped updates in a row
    spike: Literal["off", "skip", "rollback"] = "off"  # an update whose loss is far above the recent ones: skip it; rollback: also go back to a snapshot after repeated spikes and lower the LR for a while (docs/reliability.md)  # noqa: E501 (a key's help is the comment on its line)
    spike_window: int = Field(100, ge=2)  # accepted updates whose losses the spike test compares against
    spike_warmup: int = Field(20, ge=2)  # accepted updates before anything is judged (their median is the task's loss scale)  # noqa: E501 (a key's help is the comment on its line)
    spike_ratio: float = Field(3.0, gt=1.0)  # a spike is above ratio x the window's spike_quantile ...
    spike_quantile: float = Field(0.95, ge=0.5, le=1.0)  # ... (a high but robust level of the recent losses) ...
    spike_floor: float = Field(0.5, ge=0.0)  # ... and above median + floor x the task's loss scale
    spike_rollback_after: int = Field(3, ge=1)  # rollback: this many spikes ...
    spike_rollback_within: int = Field(20, ge=1)  # ... within this many updates go back to the snapshot
    spike_snapshot_every: int = Field(50, ge=1)  # rollback: updates between snapshots
    spike_lr_factor: float = Field(0.5, gt=0.0, le=1.0)  # rollback: learning-rate factor after going back ...
    spike_lr_updates: int = Field(100, ge=0)  # ... for this many updates
    spike_snapshot_on: Literal["cpu", "device"] = "cpu"  # where snapshots live (cpu: pinned memory on CUDA)
    spike_max_snapshot_gb: float = Field(8.0, gt=0.0)  # refuse rollback when a snapshot would be larger
    activation_checkpointing: Literal["none", "blocks", "every_k"] = "none"  # recompute the model's repeated blocks in backward instead of keeping their activations: less memory, more time, the same result; every_k: one block in activation_checkpointing_every  # noqa: E501 (a key's help is the comment on its line)
    activation_checkpointing_every: int = Field(2, ge=1)  # with every_k: checkpoint the 1st block of every this many

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("micro_batch_size")
    @classmethod
    def _micro_batch_size_positive(cls, v: Any) -> Any:
        if isinstance(v, int) and v < 1:
            raise ValueError("must be auto, null or a number >= 1")
        return v

    @field_validator("threads")
    @classmethod
    def _threads_positive(cls, v: Any) -> Any:
        if isinstance(v, int) and v < 1:
            raise ValueError("must be auto or a number >= 1")
        return v


class RunConfig(Section):
    """Where the run directory goes and what is written there."""

    name: str | None = None  # default: '<recipe>-<date>-<time>'
    dir: str = "runs"  # folder the run directories go in
    progress: bool = True  # progress bar
    plots: bool = True  # curves.png, lr.png

    @field_validator("dir")
    @classmethod
    def _dir_home(cls, v: str) -> str:
        return expand_home(v)

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str | None) -> str | None:
        if v is not None and (not v or "/" in v or "\\" in v or v in (".", "..") or "\0" in v):
            raise ValueError("must be a plain directory name (no '/')")
        if v is not None and len(v.encode("utf-8")) > 128:
            raise ValueError(f"is {len(v.encode('utf-8'))} bytes long; a run name may have at most 128")
        return v


class LogConfig(Section):
    """Loggers beside metrics.csv."""

    tensorboard: bool = True  # TensorBoard event files in <run>/tb
    wandb: bool = False  # needs `pip install trickbag[wandb]`; offline unless WANDB_MODE says otherwise
    every_steps: int = Field(10, ge=1)  # step-level logging interval


class DistConfig(Section):
    """Multi-process training (torchrun): DDP, or FSDP2 when the model should be split over the processes."""

    nproc: int = Field(1, ge=1)  # >1: trickbag starts torchrun with this many processes
    sync_bn: bool = False  # BatchNorm statistics over all processes (SyncBatchNorm)
    backend: Literal["auto", "gloo", "nccl"] = "auto"  # auto: nccl with CUDA, gloo otherwise
    timeout_s: float = Field(300.0, gt=0.0)  # how long a process waits for the others at a collective
    strategy: Literal["ddp", "fsdp"] = "ddp"  # ddp: every process holds the whole model; fsdp: FSDP2 (fully_shard) splits weights, gradients and optimizer state over the processes  # noqa: E501 (a key's help is the comment on its line)
    shard_modules: list[str] = Field(default_factory=list)  # fsdp: class names of the blocks sharded one by one (empty: the model's repeated blocks, found as for train.activation_checkpointing)  # noqa: E501 (a key's help is the comment on its line)
    reshard_after_forward: bool = True  # fsdp: free the gathered weights after forward (less memory, one more all-gather in backward)  # noqa: E501 (a key's help is the comment on its line)
    param_dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # fsdp: dtype the weights are gathered and computed in (the shards stay float32)  # noqa: E501 (a key's help is the comment on its line)
    reduce_dtype: Literal["float32", "bfloat16", "float16"] = "float32"  # fsdp: dtype gradients are reduced in
