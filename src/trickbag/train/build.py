"""From a recipe to a ready :class:`Trainer`: data, model, loss, optimizer, schedule, plug-ins.

Everything that can fail on bad input (recipe values, data, model names, devices) is built here
before anything is written, so a bad recipe leaves no run directory behind.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from trickbag import runtime
from trickbag.config import Recipe
from trickbag.data.sampler import EpochSampler
from trickbag.data.sources import BatchGather, DataSplits, TensorDataset, build_data, collate
from trickbag.errors import DataError, RecipeError, TrickbagError
from trickbag.models import build_model
from trickbag.train.plugin import Plugin
from trickbag.train.trainer import Trainer

__all__ = ["BuildContext", "build", "make_loader", "build_optimizer", "build_schedule"]


@dataclasses.dataclass
class BuildContext:
    """What recipe tricks may inspect and change while a run is being built (see ``configure``)."""

    recipe: Recipe
    data: DataSplits
    model: torch.nn.Module
    device: torch.device
    dist: runtime.DistInfo
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    train_loader: Any
    val_loader: Any
    test_loader: Any
    steps_per_epoch: int
    total_steps: int
    #: param groups for the optimizer (dicts with "params" and optional "lr", "weight_decay", ...)
    param_groups: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: builds the optimizer from param groups; a trick may wrap it (SAM)
    optimizer_factory: Optional[Callable[[list[dict[str, Any]]], torch.optim.Optimizer]] = None
    optimizer: Optional[torch.optim.Optimizer] = None
    scheduler: Any = None
    plugins: list[Plugin] = dataclasses.field(default_factory=list)
    #: extra entries stored in every checkpoint
    checkpoint_extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)


def make_loader(dataset: Any, recipe: Recipe, *, train: bool, dist: runtime.DistInfo, device: torch.device) -> DataLoader:
    """A DataLoader with a seeded, resumable, rank-sharded sampler and seeded workers."""
    d = recipe.data
    pin = d.pin_memory if isinstance(d.pin_memory, bool) else device.type == "cuda"
    sampler = EpochSampler(
        len(dataset), shuffle=train, seed=recipe.train.seed, rank=dist.rank, world_size=dist.world_size, pad=train
    )
    if isinstance(dataset, TensorDataset):  # in-memory: gather whole batches (same tensors, less Python)
        dataset = BatchGather(dataset)
    return DataLoader(
        dataset,
        batch_size=d.batch_size if train else (d.eval_batch_size or 4 * d.batch_size),
        sampler=sampler,
        num_workers=d.num_workers,
        pin_memory=pin,
        drop_last=d.drop_last if train else False,
        collate_fn=collate,  # BatchGather's batches pass through; anything else: default_collate
        worker_init_fn=runtime.seed_worker,
        generator=runtime.make_generator(recipe.train.seed + dist.rank),  # worker seeds differ per rank
        persistent_workers=d.num_workers > 0,
    )


def build_optimizer(recipe: Recipe, param_groups: list[dict[str, Any]]) -> torch.optim.Optimizer:
    """The recipe's optimizer over ``param_groups`` (group keys override the recipe's values)."""
    cls, kwargs = optimizer_kwargs(recipe)
    return cls(param_groups, **kwargs)


def optimizer_kwargs(recipe: Recipe) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """The recipe's optimizer class and keyword arguments (for wrappers such as SAM)."""
    o = recipe.optim
    table: dict[str, tuple[type[torch.optim.Optimizer], dict[str, Any]]] = {
        "sgd": (torch.optim.SGD, dict(lr=o.lr, momentum=o.momentum, nesterov=o.nesterov and o.momentum > 0,
                                      weight_decay=o.weight_decay)),
        "adamw": (torch.optim.AdamW, dict(lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay)),
        "adam": (torch.optim.Adam, dict(lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay)),
        "rmsprop": (torch.optim.RMSprop, dict(lr=o.lr, momentum=o.momentum, eps=o.eps, weight_decay=o.weight_decay)),
    }
    return table[o.name]


def build_schedule(
    recipe: Recipe, optimizer: torch.optim.Optimizer, steps_per_epoch: int, notes: Optional[list[str]] = None
) -> Any:
    """The recipe's LR schedule, in optimizer updates (epochs in the recipe are converted)."""
    from trickbag.optim import build_scheduler

    sc = recipe.schedule
    total = steps_per_epoch * recipe.train.epochs
    warmup = int(round(sc.warmup_epochs * steps_per_epoch))
    if warmup >= total and sc.name not in ("constant", "plateau"):
        # a quick `train.epochs=1` try of a recipe with warmup: keep half the run for the schedule
        warmup = total // 2
        if notes is not None:
            notes.append(
                f"schedule.warmup_epochs={sc.warmup_epochs} is as long as the run ({recipe.train.epochs} epochs); "
                f"warmup shortened to {warmup} updates"
            )
    kw: dict[str, Any] = {}
    if sc.name == "cosine":
        kw["min_lr"] = sc.min_lr
    elif sc.name == "step":
        kw["step_size"] = max(1, int(round(sc.step_epochs * steps_per_epoch)))
        kw["gamma"] = sc.gamma
    elif sc.name == "multistep":
        kw["milestones"] = sorted({max(warmup + 1, int(round(m * total))) for m in sc.milestones})
        kw["gamma"] = sc.gamma
    elif sc.name == "polynomial":
        kw["power"] = sc.power
    elif sc.name == "plateau":
        if warmup:
            raise RecipeError("schedule.warmup_epochs must be 0 with schedule.name=plateau")
        kw["factor"] = sc.gamma if sc.gamma < 1 else 0.1
        kw["patience"] = sc.patience
        kw["mode"] = recipe.train.mode
    try:
        return build_scheduler(optimizer, sc.name, total_steps=total, warmup_steps=warmup, **kw)
    except ValueError as exc:
        raise RecipeError(f"schedule: {exc}") from None


def build(recipe: Recipe, *, run_dir: Optional[Path] = None, device: Optional[str] = None) -> tuple[Trainer, BuildContext]:
    """Build the trainer for ``recipe`` (nothing is written; the caller adds file-writing plug-ins)."""
    from trickbag.train.tricks import build_tricks

    dist = runtime.dist_info()
    runtime.configure_determinism(recipe.train.deterministic, recipe.train.benchmark)
    if recipe.train.threads is not None:
        # tiny models gain nothing from intra-op threads, and lose a lot when a core is busy elsewhere
        torch.set_num_threads(recipe.train.threads)
    dev = runtime.select_device(device or recipe.train.device, local_rank=dist.local_rank)
    if recipe.train.precision == "16" and dev.type == "cpu":
        # fp16 autocast on CPU is slow and GradScaler's CPU support varies; bf16 is the CPU analogue
        pass
    tricks = build_tricks(recipe)  # validates the tricks section before any data is touched
    runtime.seed_everything(recipe.train.seed)
    data = build_data(recipe.data)
    probe_first_samples(data)  # a data set its transforms cannot handle fails now, not mid-run
    num_classes = recipe.model.num_classes or data.num_classes
    if num_classes < data.num_classes:
        raise RecipeError(
            f"model.num_classes={num_classes} is smaller than the {data.num_classes} classes in the data"
        )
    runtime.seed_everything(recipe.train.seed)  # model init does not depend on the data source's RNG use
    model = build_model(recipe.model.name, data.input_shape, num_classes, **recipe.model.kwargs)
    if recipe.model.weights:
        from trickbag.nn import load_matching

        from trickbag.errors import CheckpointError

        path = Path(recipe.model.weights)
        if not path.is_file():
            raise CheckpointError(f"model.weights={recipe.model.weights!r} does not exist")
        from trickbag.train.checkpoint import load_checkpoint

        sd = load_checkpoint(path)
        report = load_matching(model, sd)
        if not report.loaded:
            raise CheckpointError(f"model.weights={recipe.model.weights!r} matches no parameter of {recipe.model.name!r}: {report}")
    model.to(dev)
    if dist.distributed and recipe.dist.sync_bn:
        from trickbag.train.distributed import convert_sync_batchnorm

        model = convert_sync_batchnorm(model)  # torch's SyncBatchNorm, plus a CPU (gloo) path
    train_loader = make_loader(data.train, recipe, train=True, dist=dist, device=dev)
    if len(train_loader) == 0:
        raise RecipeError(
            f"data.batch_size={recipe.data.batch_size} with drop_last leaves no training batch "
            f"({len(data.train)} samples)"
        )
    val_loader = make_loader(data.val, recipe, train=False, dist=dist, device=dev) if data.val is not None else None
    test_loader = make_loader(data.test, recipe, train=False, dist=dist, device=dev) if data.test is not None else None
    steps_per_epoch = math.ceil(len(train_loader) / recipe.train.accumulate)
    ctx = BuildContext(
        recipe=recipe,
        data=data,
        model=model,
        device=dev,
        dist=dist,
        loss_fn=F.cross_entropy,
        train_loader=train_loader,
        val_loader=val_loader,
        test_loader=test_loader,
        steps_per_epoch=steps_per_epoch,
        total_steps=steps_per_epoch * recipe.train.epochs,
        param_groups=[{"params": [p for p in model.parameters() if p.requires_grad]}],
    )
    ctx.optimizer_factory = lambda groups: build_optimizer(recipe, groups)
    for t in tricks:
        configure = getattr(t, "configure", None)
        if configure is not None:
            configure(ctx)
    if dist.distributed:
        ctx.model = wrap_ddp(ctx.model, dev)
        from trickbag.train.distributed import seed_rank

        # every rank built the same model from train.seed (and DDP broadcast rank 0's weights);
        # from here on each rank draws its own augmentations / dropout masks
        seed_rank(recipe.train.seed, dist.rank)
    ctx.optimizer = ctx.optimizer_factory(ctx.param_groups)
    ctx.scheduler = build_schedule(recipe, ctx.optimizer, steps_per_epoch, ctx.notes)
    for t in tricks:
        after = getattr(t, "after_optimizer", None)
        if after is not None:
            after(ctx)
    ctx.plugins = list(tricks) + ctx.plugins
    if recipe.train.early_stopping_patience:
        from trickbag.train.builtin import EarlyStop

        ctx.plugins.append(
            EarlyStop(recipe.train.monitor, recipe.train.mode, recipe.train.early_stopping_patience,
                      recipe.train.early_stopping_min_delta)
        )
    from trickbag.train.nonfinite import NonFiniteGuard

    # last, so that at LOSS it sees the loss every trick has finished changing
    ctx.plugins.append(NonFiniteGuard(recipe.train.nonfinite, recipe.train.max_nonfinite,
                                      out=sys.stderr if dist.is_main else None))
    trainer = Trainer(
        ctx.model,
        ctx.optimizer,
        train_loader,
        val_loader,
        loss_fn=ctx.loss_fn,
        scheduler=ctx.scheduler,
        plugins=ctx.plugins,
        max_epochs=recipe.train.epochs,
        precision=recipe.train.precision,
        accumulate=recipe.train.accumulate,
        clip=recipe.train.clip,
        device=dev,
        run_dir=run_dir,
        monitor=recipe.train.monitor,
        mode=recipe.train.mode,
        eval_every=recipe.train.eval_every,
    )
    return trainer, ctx


def _sample_name(ds: Any, i: int) -> str:
    """`` (file ...)`` for an ImageFolder sample (also inside a Subset), else ``""``."""
    while hasattr(ds, "indices") and hasattr(ds, "dataset"):  # torch Subset
        ds, i = ds.dataset, ds.indices[i]
    samples = getattr(ds, "samples", None)
    try:
        return f" (file {samples[i][0]!r})" if samples else ""
    except (IndexError, TypeError, KeyError):
        return ""


def probe_first_samples(data: DataSplits) -> None:
    """Load the first sample of every split through its transforms; raise one :class:`DataError` if that fails.

    Catches, before anything is written, what would otherwise stop the first epoch with a
    traceback: image modes PIL cannot convert, a normalisation with the wrong number of channels,
    unreadable files, training samples whose shape differs from the data source's ``input_shape``.
    """
    for split in ("train", "val", "test"):
        ds = getattr(data, split, None)
        if ds is None or len(ds) == 0:
            continue
        try:
            x = ds[0][0]
        except TrickbagError:
            raise
        except Exception as exc:  # PIL, torchvision and shape errors all mean "this data cannot be used"
            reason = (str(exc).strip().splitlines() or [""])[0][:160]
            raise DataError(
                f"data: the first {split} sample{_sample_name(ds, 0)} cannot be loaded: {type(exc).__name__}: {reason}"
            ) from None
        shape = tuple(getattr(x, "shape", ()))
        if split == "train" and shape != tuple(data.input_shape):
            raise DataError(
                f"data: the first training sample{_sample_name(ds, 0)} has shape {list(shape)}, but the data source "
                f"gives the model input shape {list(data.input_shape)}; check data.mean/std (one value per channel)"
            )


def wrap_ddp(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """Wrap ``model`` in DistributedDataParallel on ``device`` (CPU / gloo or one GPU per process)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    if device.type == "cuda":
        return DDP(model, device_ids=[device.index], output_device=device.index)
    return DDP(model)


def check_monitor(recipe: Recipe, has_val: bool) -> None:
    """Refuse a monitor that will never be reported."""
    m = recipe.train.monitor
    if m.startswith("val/") and not has_val:
        raise TrickbagError(
            f"train.monitor={m!r} needs a validation split, but data.val_fraction=0 gives none; "
            "set data.val_fraction > 0 or monitor a train/ metric"
        )
