"""Recipes: a typed schema, YAML loading, ``key.sub=value`` overrides and one-line validation errors.

A recipe is a YAML file whose sections mirror :class:`Recipe`. Every key is validated against the
schema; an unknown key, a wrong type or an out-of-range value raises :class:`RecipeError` with one
line naming the key, the value and what is allowed (with a close-match suggestion for typos).

>>> r = load_recipe("digits", ["train.epochs=3", "optim.lr=0.05"])
>>> (r.train.epochs, r.optim.lr)
(3, 0.05)
>>> load_recipe("digits", ["optim.lrr=0.1"])
Traceback (most recent call last):
...
trickbag.errors.RecipeError: unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)
"""

from __future__ import annotations

import difflib
import importlib.resources
import typing
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trickbag.errors import RecipeError

__all__ = [
    "Recipe",
    "DataConfig",
    "BinConfig",
    "ModelConfig",
    "OptimConfig",
    "ScheduleConfig",
    "TrainConfig",
    "RunConfig",
    "DistConfig",
    "LogConfig",
    "TricksConfig",
    "load_recipe",
    "parse_overrides",
    "apply_overrides",
    "builtin_recipes",
    "recipe_to_yaml",
    "recipe_from_dict",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


# --------------------------------------------------------------------------- sections
class BinConfig(_Section):
    """How one CSV feature column is binned (``trickbag.tabular.bin_feature``) before it reaches the model."""

    method: Literal["width", "quantile", "tree"] = "quantile"  # equal width, equal frequency, or decision-tree splits on the label
    n_bins: int = Field(10, ge=1, le=1000)  # at most this many bins (ties / tree leaves may give fewer); n_bins + 1 inputs


class DataConfig(_Section):
    """Where the data comes from and how it is batched."""

    name: Literal["digits", "mnist1d", "imagefolder", "csv", "fake"] = "digits"
    root: Optional[str] = None  # folder (imagefolder) or file (csv)
    batch_size: int = Field(64, ge=1)
    eval_batch_size: Optional[int] = Field(None, ge=1)  # default: 4 x batch_size
    num_workers: int = Field(0, ge=0)
    pin_memory: Literal["auto"] | bool = "auto"  # auto: on when training on CUDA
    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)  # held-out test split (digits, csv, fake)
    val_fraction: float = Field(0.1, ge=0.0, lt=1.0)  # validation share of what remains
    split_seed: int = 0  # fixed so every run sees the same split
    drop_last: bool = False
    augment: bool = True  # the source's standard training augmentation
    image_size: Optional[int] = Field(None, ge=8)  # imagefolder: train crop size
    eval_image_size: Optional[int] = Field(None, ge=8)  # imagefolder: test size (FixRes)
    mean: Optional[list[float]] = None  # imagefolder normalisation (default ImageNet's)
    std: Optional[list[float]] = None
    label_column: str = "label"  # csv
    feature_columns: Optional[list[str]] = None  # csv: default all but the label
    num_samples: Optional[int] = Field(None, ge=10)  # fake / mnist1d: samples to generate
    num_classes: Optional[int] = Field(None, ge=2)  # fake
    shape: Optional[list[int]] = None  # fake: per-sample shape, e.g. [3, 32, 32]
    # csv: {feature column: {method, n_bins}}; edges fitted on the training split only, each binned column
    # replaced in place by one-hot bin indicators plus a last "missing" indicator (empty or NaN cells allowed)
    bins: dict[str, BinConfig] = Field(default_factory=dict)

    @field_validator("bins")
    @classmethod
    def _bins_for_csv(cls, v: dict[str, BinConfig], info: Any) -> dict[str, BinConfig]:
        if v and info.data.get("name", "csv") != "csv":
            raise ValueError(f"binning applies to data.name=csv only, not {info.data.get('name')!r}")
        if any(not k.strip() for k in v):
            raise ValueError("every key must be a CSV column name")
        return v

    @field_validator("std")
    @classmethod
    def _positive_std(cls, v: Optional[list[float]]) -> Optional[list[float]]:
        if v is not None and any(s <= 0 for s in v):
            raise ValueError("every std must be > 0")
        return v

    @field_validator("mean", "std")
    @classmethod
    def _one_per_channel(cls, v: Optional[list[float]]) -> Optional[list[float]]:
        # images are read as RGB or grayscale: any other count would be broadcast silently
        if v is not None and len(v) not in (1, 3):
            raise ValueError("give 3 values (RGB images) or 1 (grayscale)")
        return v


class ModelConfig(_Section):
    """Which network to train."""

    name: str = "digits_cnn"  # built-in, torchvision name, or 'module:function' (runs your code)
    num_classes: Optional[int] = Field(None, ge=2)  # default: taken from the data
    kwargs: dict[str, Any] = Field(default_factory=dict)  # passed to the model constructor
    weights: Optional[str] = None  # local state_dict/checkpoint to start from (partial load)


class OptimConfig(_Section):
    """Optimizer and its hyper-parameters."""

    name: Literal["sgd", "adamw", "adam", "rmsprop"] = "sgd"
    lr: float = Field(0.1, gt=0.0)  # peak learning rate (after warmup)
    momentum: float = Field(0.9, ge=0.0, lt=1.0)  # sgd, rmsprop
    nesterov: bool = True  # sgd
    weight_decay: float = Field(5e-4, ge=0.0)
    betas: tuple[float, float] = (0.9, 0.999)  # adam, adamw
    eps: float = Field(1e-8, gt=0.0)

    @field_validator("betas")
    @classmethod
    def _betas_range(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not all(0.0 <= b < 1.0 for b in v):
            raise ValueError("each beta must be in [0, 1)")
        return v


class ScheduleConfig(_Section):
    """Learning-rate schedule, stepped once per optimizer update (plateau: once per epoch)."""

    name: Literal[
        "constant", "step", "multistep", "cosine", "onecycle", "linear", "polynomial", "plateau"
    ] = "cosine"
    warmup_epochs: float = Field(0.0, ge=0.0)  # linear warmup length, in epochs (fractions allowed)
    min_lr: float = Field(0.0, ge=0.0)  # cosine: final learning rate
    step_epochs: float = Field(30.0, gt=0.0)  # step: decay every this many epochs
    milestones: list[float] = Field(default_factory=lambda: [0.5, 0.75])  # multistep: fractions of training
    gamma: float = Field(0.1, gt=0.0, le=1.0)  # step / multistep / plateau decay factor
    power: float = Field(1.0, gt=0.0)  # polynomial
    patience: int = Field(2, ge=0)  # plateau, in epochs


class TrainConfig(_Section):
    """The loop: length, precision, accumulation, seeding, selection of the best checkpoint."""

    epochs: int = Field(10, ge=1)
    precision: Literal["32", "bf16", "16"] = "32"  # "16" = fp16 autocast + GradScaler (CUDA)
    accumulate: int = Field(1, ge=1)  # micro-batches per optimizer update
    clip: Optional[float] = Field(None, gt=0.0)  # max global grad norm (None: off)
    seed: int = 0
    deterministic: bool = False
    benchmark: bool = False  # cudnn.benchmark
    device: str = "auto"
    threads: Optional[int] = Field(None, ge=1)  # CPU intra-op threads (None: torch's default); small models: 1
    monitor: str = "val/acc"  # metric for best.pt and early stopping
    mode: Literal["max", "min"] = "max"
    early_stopping_patience: Optional[int] = Field(None, ge=1)  # epochs without improvement
    early_stopping_min_delta: float = Field(0.0, ge=0.0)
    eval_every: int = Field(1, ge=1)  # epochs between validations
    checkpoint_every_steps: Optional[int] = Field(None, ge=1)  # extra mid-epoch checkpoints
    keep_checkpoints: int = Field(3, ge=1)  # step checkpoints kept for fallback on resume
    nonfinite: Literal["skip", "stop"] = "skip"  # what a NaN/Inf loss or gradient does
    max_nonfinite: int = Field(5, ge=1)  # stop after this many skipped updates in a row

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class RunConfig(_Section):
    """Where the run directory goes and what is written there."""

    name: Optional[str] = None  # default: '<recipe>-<date>-<time>'
    dir: str = "runs"
    progress: bool = True  # progress bar
    plots: bool = True  # curves.png, lr.png

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (not v or "/" in v or "\\" in v or v in (".", "..")):
            raise ValueError("must be a plain directory name (no '/')")
        return v


class LogConfig(_Section):
    """Loggers beside metrics.csv."""

    tensorboard: bool = True
    wandb: bool = False  # needs `pip install trickbag[wandb]`; offline unless WANDB_MODE says otherwise
    every_steps: int = Field(10, ge=1)  # step-level logging interval


class DistConfig(_Section):
    """Multi-process training (torchrun / DDP)."""

    nproc: int = Field(1, ge=1)  # >1: trickbag starts torchrun with this many processes
    sync_bn: bool = False
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    timeout_s: float = Field(300.0, gt=0.0)


# --------------------------------------------------------------------------- tricks: batch, loss, optimizer
class LabelSmoothingConfig(_Section):
    """Label smoothing (Szegedy et al. 2016): train on ``(1 - eps) * onehot + eps / C``."""

    enabled: bool = False
    eps: float = Field(0.1, ge=0.0, lt=1.0)  # probability mass spread evenly over all C classes (paper: 0.1)


class MixConfig(_Section):
    """Mixup and/or CutMix on every training batch (one section: both methods and the switch)."""

    enabled: bool = False
    mixup_alpha: float = Field(0.8, ge=0.0)  # Beta(a, a) of the mixup weight; 0 turns mixup off (DeiT: 0.8)
    cutmix_alpha: float = Field(1.0, ge=0.0)  # Beta(a, a) of the CutMix area; 0 turns CutMix off (Yun et al.: 1.0)
    prob: float = Field(1.0, ge=0.0, le=1.0)  # probability that a batch is mixed at all
    switch_prob: float = Field(0.5, ge=0.0, le=1.0)  # probability of CutMix rather than mixup when both are on


class CutoutConfig(_Section):
    """Cutout (DeVries & Taylor 2017): blank one square per training image."""

    enabled: bool = False
    size: Optional[int] = Field(None, ge=1)  # square side in pixels; None: half the shorter image side (16 of 32)
    prob: float = Field(1.0, ge=0.0, le=1.0)  # probability that an image gets a square


class FocalConfig(_Section):
    """Softmax focal loss (Lin et al. 2017) instead of cross-entropy."""

    enabled: bool = False
    gamma: float = Field(2.0, ge=0.0)  # focusing exponent on (1 - p); 0 is cross-entropy (paper: 2)
    alpha: Optional[float | list[float]] = None  # C per-class balancing factors, or one value a for C=2: [1-a, a]

    @field_validator("alpha")
    @classmethod
    def _alpha_range(cls, v: Optional[float | list[float]]) -> Optional[float | list[float]]:
        if isinstance(v, list) and (not v or any(a < 0 for a in v)):
            raise ValueError("must be a non-empty list of per-class factors >= 0")
        if isinstance(v, float) and not 0.0 <= v <= 1.0:
            raise ValueError("a single alpha must lie in [0, 1] (binary convention)")
        return v


class ClassBalancedConfig(_Section):
    """Class-balanced loss weights from the effective number of samples (Cui et al. 2019)."""

    enabled: bool = False
    beta: float = Field(0.9999, ge=0.0, lt=1.0)  # w_c ~ (1 - beta) / (1 - beta^n_c); 0: no re-weighting (paper)


class DistillationConfig(_Section):
    """Knowledge distillation from a teacher network (Hinton et al. 2015)."""

    enabled: bool = False
    teacher: Optional[str] = None  # a trickbag run checkpoint (.pt) or 'package.module:function' returning the teacher
    temperature: float = Field(4.0, gt=0.0)  # softmax temperature T of both networks (paper: 1-20)
    alpha: float = Field(0.5, ge=0.0, le=1.0)  # weight of the distillation term; 1 - alpha on the usual loss


class L1Config(_Section):
    """L1 penalty on the trainable weights added to the loss."""

    enabled: bool = False
    weight: float = Field(1e-5, gt=0.0)  # lambda in loss + lambda * sum |w| (sum over all trainable parameters)


class ClipConfig(_Section):
    """Gradient clipping once per update: global norm, element value, or adaptive (AGC)."""

    enabled: bool = False
    mode: Literal["norm", "value", "agc"] = "norm"
    max_norm: float = Field(1.0, gt=0.0)  # norm: largest global L2 norm of all gradients together
    value: float = Field(1.0, gt=0.0)  # value: clamp every gradient element to [-value, value]
    clip_factor: float = Field(0.01, gt=0.0)  # agc: largest ||grad|| / ||weight|| per unit (Brock et al. 2021: 0.01)
    eps: float = Field(1e-3, gt=0.0)  # agc: floor of a unit's weight norm, so zero-initialised units can move
    exclude_head: bool = True  # agc: leave the final classifier layer unclipped, as the paper does


class GradNormConfig(_Section):
    """Log the global gradient norm (before clipping) per update and per epoch."""

    enabled: bool = False


class SAMConfig(_Section):
    """Sharpness-Aware Minimization (Foret et al. 2021) around the recipe's optimizer; ASAM with adaptive."""

    enabled: bool = False
    rho: Optional[float] = Field(None, gt=0.0)  # neighbourhood radius; None: 0.05 (SAM) or 0.5 (ASAM, Kwon et al. 2021)
    adaptive: bool = False  # ASAM: the radius scales with |w| per element (scale-invariant sharpness)


# --------------------------------------------------------------------------- tricks: weights, model, evaluation
def _needs_items(v: list, info: Any, what: str) -> list:
    if info.data.get("enabled") and not v:
        raise ValueError(f"list at least one {what} when the trick is enabled")
    return v


class FreezeConfig(_Section):
    """Freeze parameters by name (transfer learning), optionally unfreezing them at a later epoch."""

    enabled: bool = False
    patterns: list[str] = Field(default_factory=list, validate_default=True)  # parameter-name globs, e.g. ["features.*"]
    regex: bool = False  # patterns are regular expressions (re.fullmatch) instead of globs
    bn_stats: bool = False  # also keep the running statistics of fully frozen BatchNorm layers fixed (eval mode)
    unfreeze_epoch: Optional[int] = Field(None, ge=1)  # 0-based epoch at whose start they train again; None: never

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, v: list[str], info: Any) -> list[str]:
        return _needs_items(v, info, "parameter-name pattern")


class ParamGroupsConfig(_Section):
    """Optimizer parameter groups: no weight decay on biases/norms, per-pattern learning-rate factors."""

    enabled: bool = False
    no_decay_bias_norm: bool = True  # biases, 1-D params and norm layers get weight_decay=0 (Goyal et al. 2017)
    lr_scale: dict[str, float] = Field(default_factory=dict)  # {parameter-name glob: LR factor >= 0}, e.g. {"head.*": 10}

    @field_validator("lr_scale")
    @classmethod
    def _scales(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: f for k, f in v.items() if not f >= 0}
        if bad:
            raise ValueError(f"every LR factor must be >= 0, got {bad}")
        return v


class LayerDecayConfig(_Section):
    """Layer-wise learning-rate decay (ELECTRA, Clark et al. 2020; BEiT): earlier layers learn slower."""

    enabled: bool = False
    decay: float = Field(0.75, gt=0.0, le=1.0)  # LR factor per layer below the top one (BEiT/MAE fine-tuning: 0.65-0.75)
    depth: int = Field(1, ge=1)  # name components that make a layer: 1 -> 'features', 2 -> 'features.0'


class EMAConfig(_Section):
    """Exponential moving average of the weights; evaluation and best.pt use the averaged weights."""

    enabled: bool = False
    decay: float = Field(0.9998, ge=0.0, le=1.0)  # per averaging update; time constant 1/(1-decay) updates (timm: 0.9998)
    warmup: bool | int = True  # True: decay min(decay, (1+n)/(10+n)); int W: decay (1-exp(-n/W)); False: none
    every: int = Field(1, ge=1)  # average every this many optimizer updates
    buffers: Literal["copy", "average"] = "copy"  # BatchNorm running statistics: copied from the live model or averaged
    eval_raw: bool = True  # also evaluate the raw weights each epoch: val/acc_raw, val/loss_raw

    @field_validator("warmup")
    @classmethod
    def _warmup(cls, v: bool | int) -> bool | int:
        if not isinstance(v, bool) and v < 1:
            raise ValueError("must be true, false, or a number of averaging updates >= 1")
        return v


class SWAConfig(_Section):
    """Stochastic weight averaging (Izmailov et al. 2018): average the weights of the last epochs at a constant LR."""

    enabled: bool = False
    start_epoch: Optional[int] = Field(None, ge=0)  # first epoch (0-based) of the averaging phase; None: start_fraction
    start_fraction: float = Field(0.75, gt=0.0, lt=1.0)  # averaging starts after this fraction of train.epochs (paper: 0.75)
    lr_factor: float = Field(0.5, gt=0.0)  # SWA learning rate = lr_factor x each param group's base LR
    anneal_epochs: float = Field(1.0, ge=0.0)  # epochs to anneal from the current LR to the SWA LR (SWALR)
    anneal_strategy: Literal["cos", "linear"] = "cos"
    update_bn: bool = True  # recompute BatchNorm statistics of the averaged weights on the training data


class MultiscaleConfig(_Section):
    """Multi-scale / FixRes training (Touvron et al. 2019): resize training batches, fine-tune at the test size."""

    enabled: bool = False
    train_sizes: list[int] = Field(default_factory=list, validate_default=True)  # square training sizes in pixels; several: one drawn per batch
    test_size: Optional[int] = Field(None, ge=4)  # evaluation size in pixels; None: the data's own size
    finetune_epochs: int = Field(1, ge=0)  # last epochs trained at the test size (FixRes fine-tuning)
    mode: Literal["bilinear", "bicubic", "nearest", "area"] = "bilinear"  # F.interpolate mode

    @field_validator("train_sizes")
    @classmethod
    def _sizes(cls, v: list[int], info: Any) -> list[int]:
        if any(s < 4 for s in v):
            raise ValueError("every size must be >= 4 pixels")
        return _needs_items(v, info, "training size")


class ChannelsLastConfig(_Section):
    """Channels-last (NHWC) memory format for the model and 4-D batches (faster convolutions on tensor cores)."""

    enabled: bool = False


class CompileConfig(_Section):
    """torch.compile the model (off by default: compilation takes time up front)."""

    enabled: bool = False
    backend: str = "inductor"  # torch.compile backend; 'aot_eager' / 'eager' to debug
    mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    dynamic: Optional[bool] = None  # dynamic shapes; None lets torch decide
    fullgraph: bool = False  # fail instead of falling back on graph breaks


class TTAConfig(_Section):
    """Test-time augmentation at evaluation: average the predictions on flipped inputs."""

    enabled: bool = False
    hflip: bool = True  # add the input flipped along the last dimension (width)
    vflip: bool = False  # add the input flipped along the height (images [N, C, H, W] only)
    average: Literal["probs", "logits"] = "probs"  # average softmax probabilities (output: their log) or logits


class ProfileConfig(_Section):
    """Profile a few optimizer updates with torch.profiler; Chrome trace and op table in <run>/profile/."""

    enabled: bool = False
    wait: int = Field(1, ge=0)  # updates run before the profiler starts
    warmup: int = Field(1, ge=0)  # updates profiled and discarded (profiler warm-up)
    steps: int = Field(3, ge=1)  # updates recorded
    record_shapes: bool = False  # record input shapes of every op
    profile_memory: bool = False  # record tensor allocations
    with_stack: bool = False  # record Python stacks (large traces)


class TricksConfig(_Section):
    """Training tricks switched on from the recipe (see ``trickbag tricks``)."""

    label_smoothing: LabelSmoothingConfig = Field(default_factory=LabelSmoothingConfig)
    mix: MixConfig = Field(default_factory=MixConfig)
    cutout: CutoutConfig = Field(default_factory=CutoutConfig)
    focal: FocalConfig = Field(default_factory=FocalConfig)
    class_balanced: ClassBalancedConfig = Field(default_factory=ClassBalancedConfig)
    distillation: DistillationConfig = Field(default_factory=DistillationConfig)
    l1: L1Config = Field(default_factory=L1Config)
    clip: ClipConfig = Field(default_factory=ClipConfig)
    grad_norm: GradNormConfig = Field(default_factory=GradNormConfig)
    sam: SAMConfig = Field(default_factory=SAMConfig)
    freeze: FreezeConfig = Field(default_factory=FreezeConfig)
    param_groups: ParamGroupsConfig = Field(default_factory=ParamGroupsConfig)
    layer_decay: LayerDecayConfig = Field(default_factory=LayerDecayConfig)
    multiscale: MultiscaleConfig = Field(default_factory=MultiscaleConfig)
    channels_last: ChannelsLastConfig = Field(default_factory=ChannelsLastConfig)
    compile: CompileConfig = Field(default_factory=CompileConfig)
    tta: TTAConfig = Field(default_factory=TTAConfig)
    ema: EMAConfig = Field(default_factory=EMAConfig)
    swa: SWAConfig = Field(default_factory=SWAConfig)
    profile: ProfileConfig = Field(default_factory=ProfileConfig)


class Recipe(_Section):
    """A whole training recipe."""

    name: str = "custom"
    description: str = ""
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    dist: DistConfig = Field(default_factory=DistConfig)
    tricks: TricksConfig = Field(default_factory=TricksConfig)

    @model_validator(mode="after")
    def _cross_checks(self) -> "Recipe":
        if self.train.deterministic and self.train.benchmark:
            raise ValueError(
                "train.deterministic and train.benchmark cannot both be true "
                "(cuDNN autotuning is not deterministic)"
            )
        return self


# --------------------------------------------------------------------------- errors
def _schema_keys(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _section_model(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = Recipe
    parts = list(loc)
    while parts:
        field = model.model_fields.get(str(parts.pop(0)))
        if field is None:
            return None
        ann = field.annotation
        value_type = typing.get_args(ann)[-1] if typing.get_origin(ann) is dict else None
        if isinstance(value_type, type) and issubclass(value_type, BaseModel) and parts:
            parts.pop(0)  # a mapping of sections (data.bins.<column>): skip the key
            ann = value_type
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return None
    return model


def _all_keys(model: type[BaseModel] = Recipe, prefix: str = "") -> list[str]:
    keys: list[str] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys += _all_keys(ann, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def format_validation_error(err: ValidationError) -> str:
    """Turn pydantic's report into one line about the first problem, naming key, value and what is allowed."""
    e = err.errors()[0]
    loc = tuple(str(p) for p in e["loc"])
    key = ".".join(loc) if loc else "recipe"
    typ = e["type"]
    if typ == "extra_forbidden":
        parent = _section_model(loc[:-1])
        # compare the last part within its section: whole dotted keys share the section prefix, which
        # made any unknown key look close to some key of the same section
        prefix = ".".join(loc[:-1])
        names = difflib.get_close_matches(loc[-1], _schema_keys(parent), n=1, cutoff=0.6) if parent else []
        close = [f"{prefix}.{n}" if prefix else n for n in names] or difflib.get_close_matches(
            key, _all_keys(), n=1, cutoff=0.75
        )
        if close:
            return f"unknown recipe key {key!r} (did you mean {close[0]!r}?)"
        allowed = ", ".join(_schema_keys(parent)) if parent else ", ".join(_schema_keys(Recipe))
        where = f"in '{'.'.join(loc[:-1])}'" if loc[:-1] else "at the top level"
        return f"unknown recipe key {key!r}; allowed {where}: {allowed or '(none)'}"
    value = e.get("input")
    msg = e["msg"]
    if typ == "literal_error":
        expected = e.get("ctx", {}).get("expected", "")
        return f"recipe key {key!r}: {_short(value)} is not allowed; allowed: {expected}"
    if typ == "value_error" and not loc:
        return f"invalid recipe: {msg.removeprefix('Value error, ')}"
    if typ == "model_type" or typ == "dict_type":
        return f"recipe key {key!r} must be a mapping of keys, got {_short(value)}"
    msg = msg.removeprefix("Value error, ")
    return f"recipe key {key!r}: {_short(value)} is not allowed: {msg[0].lower() + msg[1:]}"


# --------------------------------------------------------------------------- loading
def builtin_recipes() -> dict[str, Path]:
    """Names and paths of the recipes shipped inside the package."""
    folder = importlib.resources.files("trickbag") / "recipes"
    out: dict[str, Path] = {}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            out[entry.name[: -len(".yaml")]] = Path(str(entry))
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RecipeError(f"recipe {str(path)!r} is not a text file (YAML expected)") from None
    except OSError as exc:
        raise RecipeError(f"recipe {str(path)!r} cannot be read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid syntax"
        raise RecipeError(f"recipe {str(path)!r} is not valid YAML{where}: {problem}") from None
    if data is None:
        raise RecipeError(f"recipe {str(path)!r} is empty; start from a built-in one (`trickbag recipes`)")
    if not isinstance(data, dict):
        raise RecipeError(
            f"recipe {str(path)!r} must be a mapping of sections (data:, model:, ...), got {type(data).__name__}"
        )
    return data


def parse_overrides(items: list[str]) -> list[tuple[list[str], Any]]:
    """Parse ``key.sub=value`` strings; values are read as YAML scalars/lists (``0.1``, ``true``, ``[1,2]``).

    >>> parse_overrides(["optim.lr=0.05", "run.name=try1", "data.mean=[0.5]"])
    [(['optim', 'lr'], 0.05), (['run', 'name'], 'try1'), (['data', 'mean'], [0.5])]
    """
    out = []
    for item in items:
        if "=" not in item:
            raise RecipeError(f"override {item!r} has no '='; write it as key.sub=value, e.g. optim.lr=0.05")
        key, _, raw = item.partition("=")
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise RecipeError(f"override {item!r} has an empty key; write it as key.sub=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        out.append((key.split("."), value))
    return out


def apply_overrides(data: dict[str, Any], overrides: list[tuple[list[str], Any]]) -> dict[str, Any]:
    """Set each override in a nested dict (a copy); intermediate mappings are created as needed."""
    import copy

    data = copy.deepcopy(data)
    for parts, value in overrides:
        node = data
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise RecipeError(
                    f"override {'.'.join(parts)!r}: {'.'.join(parts[: i + 1])!r} is a value, not a section"
                )
            node = nxt
        node[parts[-1]] = value
    return data


def recipe_from_dict(data: dict[str, Any]) -> Recipe:
    """Validate a nested dict as a :class:`Recipe`, raising :class:`RecipeError` on the first problem."""
    try:
        return Recipe.model_validate(data)
    except ValidationError as err:
        raise RecipeError(format_validation_error(err)) from None


def resolve_recipe_path(name_or_path: str) -> Path:
    """A built-in recipe name or a path to a YAML file."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    builtins = builtin_recipes()
    stem = name_or_path[:-5] if name_or_path.endswith(".yaml") else name_or_path
    if stem in builtins and not path.exists():
        return builtins[stem]
    if Path(stem).name in builtins and not path.exists() and path.parent.name == "recipes":
        return builtins[Path(stem).name]
    if path.is_dir():
        raise RecipeError(f"recipe {name_or_path!r} is a directory; give a YAML file or a built-in name")
    close = difflib.get_close_matches(stem, list(builtins), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise RecipeError(
        f"recipe {name_or_path!r} not found{hint}; give a YAML file or one of: {', '.join(builtins)}"
    )


def load_recipe(name_or_path: str | None = None, overrides: list[str] | None = None) -> Recipe:
    """Load a built-in recipe by name (default ``digits``) or a YAML file, then apply overrides."""
    path = resolve_recipe_path(name_or_path or "digits")
    data = _read_yaml(path)
    data.setdefault("name", path.stem)
    data = apply_overrides(data, parse_overrides(list(overrides or [])))
    return recipe_from_dict(data)


def recipe_to_yaml(recipe: Recipe) -> str:
    """The fully resolved recipe as YAML (every default written out)."""
    return yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)


def load_run_recipe(run_dir: str | Path, overrides: list[str] | None = None) -> Recipe:
    """The resolved recipe saved in a run directory, with overrides applied (for ``--resume``)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RecipeError(f"--resume {str(run_dir)!r}: no such run directory")
    path = run_dir / "recipe.yaml"
    if not path.is_file():
        raise RecipeError(f"{str(run_dir)!r} is not a trickbag run directory (no recipe.yaml)")
    data = apply_overrides(_read_yaml(path), parse_overrides(list(overrides or [])))
    return recipe_from_dict(data)
