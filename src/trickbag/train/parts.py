"""From a recipe to the parts of a run: data, task, model, loaders, schedule and the build context tricks see;
and from a run checkpoint back to its model.

Everything that can fail on bad input (recipe values, data, model names, devices) is built here
before anything is written, so a bad recipe leaves no run directory behind. Nothing here needs the
trainer: :mod:`trickbag.train.build` puts the parts into a :class:`~trickbag.train.trainer.Trainer`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Callable, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import torch
from torch.utils.data import DataLoader

from trickbag import runtime
from trickbag.data.sampler import EpochSampler
from trickbag.data.sources import BatchGather, DataSplits, TensorDataset, build_data, collate
from trickbag.errors import CheckpointError, DataError, RecipeError, TrickbagError
from trickbag.models import build_model, import_callable, is_callable_spec
from trickbag.plugin.context import TrickContext
from trickbag.plugin.interface import Plugin
from trickbag.recipe import Recipe, recipe_from_dict
from trickbag.train.checkpoint_files import check_state_fits, load_checkpoint
from trickbag.train.tasks import Classification, Task

if TYPE_CHECKING:
    pass

__all__ = ["make_loader", "optimizer_spec", "build_schedule", "make_task", "model_from_checkpoint",
           "probe_first_samples", "resolve_monitor", "resolve_model_name", "user_plugins", "model_for", "wrap_ddp",
           "load_model", "RunParts", "trick_context"]


def make_loader(
    dataset: Any, recipe: Recipe, *, train: bool, dist: runtime.DistInfo, device: torch.device
) -> DataLoader:
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
        worker_init_fn=runtime.detached_worker,  # seeded, and out of reach of a signal to the process group
        generator=runtime.make_generator(recipe.train.seed + dist.rank),  # worker seeds differ per rank
        persistent_workers=d.num_workers > 0,
    )


#: whether the monitored metric should rise or fall
Mode = Literal["max", "min"]


@dataclasses.dataclass(kw_only=True)
class RunParts:
    """What the recipe build made of a recipe, for the run path (the tricks see a :class:`TrickContext` made from
    it, see :func:`trick_context`): the data, task, model, loaders, optimizer and schedule, the plug-ins, the
    monitored metric, and what the run prints and stores."""

    recipe: Recipe
    data: DataSplits
    task: Task
    model: torch.nn.Module
    device: torch.device
    dist: runtime.DistInfo
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    train_loader: Any
    val_loader: Any
    test_loader: Any
    steps_per_epoch: int
    total_steps: int
    #: outputs of the model: classes, labels or regression targets
    num_outputs: int
    param_groups: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: the recipe's optimizer class and keyword arguments
    optimizer_spec: tuple[type, dict[str, Any]] = (torch.optim.SGD, {})
    #: builds the optimizer from param groups (a functools.partial; a trick may wrap it: SAM)
    optimizer_factory: Callable[[list[dict[str, Any]]], torch.optim.Optimizer] | None = None
    #: the clipping rule the trainer applies once per update (a max norm, a function, or None)
    clip: Any = None
    optimizer: torch.optim.Optimizer | None = None
    scheduler: Any = None
    plugins: list[Plugin] = dataclasses.field(default_factory=list)
    #: the recipe's ``train.plugins``, built; the run path adds them after every other plug-in
    user_plugins: list[Plugin] = dataclasses.field(default_factory=list)
    #: the metric best.pt and early stopping follow, and whether larger is better
    monitor: str = "val/acc"
    mode: Mode = "max"
    #: what loading ``model.weights`` did (None without weights): loaded, missing, unexpected, mismatched
    weights_report: Any = None
    #: extra entries stored in every checkpoint
    checkpoint_extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    #: ``train.threads: auto``'s per-epoch check (None for a fixed count), and what was set
    threads_check: Any = None
    threads: str = ""

    def threads_report(self) -> str:
        """The thread count of the run, e.g. ``1`` or ``auto -> 1 (2 cores, 1.0 busy with other processes)``."""
        return self.threads_check.report() if self.threads_check is not None else self.threads

    def make_loader(self, dataset: Any, *, train: bool) -> DataLoader:
        """A loader over ``dataset`` made like the run's own (seeded sampler, rank shard, workers)."""
        return make_loader(dataset, self.recipe, train=train, dist=self.dist, device=self.device)

    def load_model(self, spec: str) -> torch.nn.Module:
        """A trained network named by a run checkpoint path or ``package.module:function`` (a teacher)."""
        return load_model(spec)


def trick_context(parts: RunParts) -> TrickContext:
    """The :class:`TrickContext` the recipe's tricks are set up on: the run's facts and its changeable parts."""
    data, report = parts.data, parts.weights_report
    plain = data.eval_train if data.eval_train is not None else data.train
    assert parts.optimizer_factory is not None
    counts = data.class_counts
    return TrickContext(
        seed=parts.recipe.train.seed, epochs=parts.recipe.train.epochs, updates_per_epoch=parts.steps_per_epoch,
        rank=parts.dist.rank, num_outputs=parts.num_outputs, train_set=data.train,
        class_counts=tuple(counts) if counts is not None else None,
        train_eval_loader=lambda: parts.make_loader(plain, train=False),
        loaded_weights=frozenset(report.loaded) if report is not None else None, load_model=load_model,
        model=parts.model, param_groups=parts.param_groups, loss_fn=parts.loss_fn, clip=parts.clip,
        make_optimizer=parts.optimizer_factory,
    )


def optimizer_spec(recipe: Recipe) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """The recipe's optimizer class and keyword arguments (its :mod:`trickbag.optim.optimizers` entry's ``spec``)."""
    from trickbag.optim import optimizers

    return optimizers.get(recipe.optim.name).spec(recipe.optim)


def _lookahead(recipe: Recipe, inner: Callable[[list[dict[str, Any]]], torch.optim.Optimizer]
               ) -> Callable[[list[dict[str, Any]]], torch.optim.Optimizer]:
    """``optim.lookahead_k``: Lookahead (Zhang et al. 2019; pytorch_optimizer's) around the recipe's optimizer."""
    from trickbag._optional import require
    from trickbag.optim import optimizers

    o = recipe.optim
    why = optimizers.get(o.name).no_lookahead
    if why:
        raise RecipeError(f"optim.lookahead_k with optim.name={o.name}: {why}; set optim.lookahead_k=0")
    look = require("pytorch_optimizer", extra="optimizers", feature="optim.lookahead_k").Lookahead
    return functools.partial(_with_lookahead, base=inner, lookahead=look, k=o.lookahead_k, alpha=o.lookahead_alpha)


def _with_lookahead(groups: list[dict[str, Any]], *, base: Callable[[list[dict[str, Any]]], torch.optim.Optimizer],
                    lookahead: Any, k: int, alpha: float) -> torch.optim.Optimizer:
    return lookahead(base(groups), k=k, alpha=alpha)


def build_schedule(recipe: Recipe, optimizer: torch.optim.Optimizer, steps_per_epoch: int,
                   notes: list[str] | None = None, mode: str = "max", total_steps: int | None = None) -> Any:
    """The recipe's LR schedule, in optimizer updates (epochs in the recipe are converted); ``mode``:
    whether the monitored metric (plateau) should rise or fall; ``total_steps``: the run's updates when another
    framework counts them (its ``max_steps``, a fraction of an epoch, batches it drops); default: epochs x
    ``steps_per_epoch``."""
    from trickbag.optim import build_scheduler, optimizers
    from trickbag.optim.schedules import SCHEDULES
    from trickbag.optim.schedules.base import RecipeSteps

    sc = recipe.schedule
    schedule_free = optimizers.get(recipe.optim.name).schedule_free
    if schedule_free and sc.name != "none":
        raise RecipeError(f"optim.name={recipe.optim.name} is schedule-free: it needs schedule.name=none, not "
                          f"{sc.name} (its warm-up comes from schedule.warmup_epochs)")
    if sc.name == "none":  # the optimizer keeps its own learning rate (schedule-free optimizers)
        if sc.warmup_epochs and not schedule_free:
            raise RecipeError(f"schedule.name=none takes no warm-up (schedule.warmup_epochs={sc.warmup_epochs}); "
                              "set schedule.warmup_epochs=0, or use schedule.name=constant for a warm-up alone")
        return None
    total = steps_per_epoch * recipe.train.epochs if total_steps is None else int(total_steps)
    warmup = int(round(sc.warmup_epochs * steps_per_epoch))
    schedule = SCHEDULES[sc.name]
    if warmup >= total and schedule.shorten_warmup:
        # a quick `train.epochs=1` try of a recipe with warmup: keep half the run for the schedule
        warmup = total // 2
        if notes is not None:
            notes.append(f"schedule.warmup_epochs={sc.warmup_epochs} is as long as the run ({recipe.train.epochs} "
                         f"epochs); warmup shortened to {warmup} updates")
    try:
        return build_scheduler(optimizer, sc.name, total_steps=total, warmup_steps=warmup,
                               **schedule.from_recipe(sc, RecipeSteps(warmup, total, steps_per_epoch, mode)))
    except ValueError as exc:
        raise RecipeError(f"schedule: {exc}") from None


def make_task(recipe: Recipe, data: DataSplits) -> Task:
    """The recipe's task for ``data``: classification with as many classes as ``model.num_classes`` or the
    data has, multi-label over the data's labels, or regression of its targets (with their scaling)."""
    from trickbag.train.tasks import Multilabel, Regression

    kind = recipe.task.type
    if kind != "classification" and recipe.model.num_classes and recipe.model.num_classes != data.num_classes:
        what = "label" if kind == "multilabel" else "target"
        raise RecipeError(f"model.num_classes={recipe.model.num_classes} does not apply to task.type={kind}: the model "
                          f"gets one output per {what} column ({data.num_classes}); leave model.num_classes unset")
    if kind == "multilabel":
        return Multilabel(num_labels=data.num_classes, labels=list(data.classes))
    if kind == "regression":
        n = data.num_classes
        return Regression(num_targets=n, target_mean=data.target_mean or [0.0] * n,
                          target_std=data.target_std or [1.0] * n, loss_name="huber" if recipe.task.loss == "huber"
                          else "mse", huber_delta=recipe.task.huber_delta, targets=list(data.classes))
    if recipe.task.loss != "auto":
        raise RecipeError(f"task.loss={recipe.task.loss} is a regression loss; with task.type={kind} use auto")
    num_classes = recipe.model.num_classes or data.num_classes
    if num_classes < data.num_classes:
        raise RecipeError(f"model.num_classes={num_classes} is smaller than the {data.num_classes} classes in the data")
    return Classification(num_classes=num_classes, classes=list(data.classes))


_LOWER_IS_BETTER = ("loss", "mae", "rmse")
_TRAIN_METRICS = ("loss", "samples_per_s", "epoch_time_s", "grad_norm", "grad_norm_max")


def resolve_monitor(recipe: Recipe, task: Task, has_val: bool) -> tuple[str, Mode]:
    """``(train.monitor, train.mode)`` with ``auto`` resolved for ``task``; a metric the run will never
    report is refused in one line."""
    monitor, mode = recipe.train.monitor, recipe.train.mode
    if monitor == "auto":
        monitor = task.monitor[0] if has_val else "train/loss"
    split, _, name = monitor.partition("/")
    base = name.removesuffix("_raw")
    if split == "lr" and re.fullmatch(r"group\d+", name):  # a param group's learning rate, per epoch
        return monitor, mode if mode != "auto" else "min"
    allowed = {"val": ["loss", *task.metric_names(test=True)],
               "train": [*_TRAIN_METRICS, *([task.train_stat_name] if task.train_stat_name else [])]}
    if split not in allowed or base not in allowed[split]:
        choices = [f"val/{n}" for n in allowed["val"]] + [f"train/{n}" for n in allowed["train"]]
        raise RecipeError(f"train.monitor={monitor!r} is not a metric of task.type={task.name}; allowed: "
                          f"{', '.join(choices)} (val/<metric>_raw with EMA/SWA)")
    if split == "val" and not has_val:
        raise RecipeError(f"train.monitor={monitor!r} needs a validation split, but data.val_fraction=0 gives none; "
                          "set data.val_fraction > 0 or monitor a train/ metric")
    if mode == "auto":
        mode = "min" if base in _LOWER_IS_BETTER else "max"
    return monitor, mode


def user_plugins(specs: list[str]) -> list[Plugin]:
    """The plug-ins ``train.plugins`` names: ``package.module:Name``, a Plugin class (made with no
    arguments) or a function returning a plug-in or a list of them (importing it runs its code)."""
    out: list[Plugin] = []
    for spec in specs:
        made = import_callable(spec, "train.plugins")()
        made = made if isinstance(made, (list, tuple)) else [made]
        bad = [type(p).__name__ for p in made if not isinstance(p, Plugin)]
        if bad:
            raise RecipeError(f"train.plugins: {spec!r} made {bad[0]}, not a trickbag Plugin; subclass "
                              "trickbag.plugin.interface.Plugin")
        out += list(made)
    return out


def _load_weights(model: torch.nn.Module, recipe: Recipe, name: str) -> Any:
    """Load ``model.weights`` where names and shapes match; the :class:`~trickbag.nn.LoadReport`."""
    from trickbag.nn import load_matching

    assert recipe.model.weights is not None  # called only when the recipe names weights
    path = Path(recipe.model.weights).expanduser()
    if not path.is_file():
        raise CheckpointError(f"model.weights={recipe.model.weights!r} does not exist")
    ckpt = load_checkpoint(path)
    if isinstance(ckpt.get("eval_model"), dict):  # a trickbag run checkpoint: the weights it evaluated
        ckpt = ckpt["eval_model"]
    report = load_matching(model, ckpt)
    if not report.loaded:
        raise CheckpointError(f"model.weights={recipe.model.weights!r} matches no parameter of {name!r}: "
                              f"{report}")
    return report


def resolve_model_name(recipe: Recipe, data: DataSplits) -> str:
    """``model.name``, with ``auto`` replaced by a model that fits the data: an MLP for tabular features,
    the signal CNN for 1-D signals, a small CNN for images under 64 pixels, ResNet-18 for larger ones."""
    name = recipe.model.name
    if name != "auto":
        return name
    shape = tuple(data.input_shape)
    if data.kind == "tabular" or len(shape) == 1:
        return "mlp"
    if data.kind == "signal" or len(shape) == 2:
        return "signal_cnn"
    return "small_cnn" if min(shape[1:]) < 64 else "resnet18"


def _memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # not POSIX
        return 64 * 2**30


def _check_size(name: str, input_shape: tuple[int, ...], outputs: int, kwargs: dict[str, Any]) -> None:
    """Build the model on the meta device first (no memory): one that cannot fit is refused before allocation."""
    try:
        with torch.device("meta"):
            probe = build_model(name, input_shape, outputs, **kwargs)
    except TrickbagError:
        raise
    except Exception:  # a model that cannot be built on the meta device: the real build will tell
        return
    n = sum(p.numel() for p in probe.parameters())
    need = 16 * n  # float32 weights, gradients and two optimizer moments
    if need > _memory_bytes():
        raise RecipeError(
            f"model {name!r} with model.kwargs={kwargs} would have {n:,} parameters ({need / 2**30:.0f} GiB "
            f"for weights, gradients and optimizer state), more than this machine's "
            f"{_memory_bytes() / 2**30:.0f} GiB; make it smaller"
        )


def model_for(recipe: Recipe, data: DataSplits) -> torch.nn.Module:
    """A fresh (seeded by the caller) model of the recipe for ``data``: ``model.name`` (``auto`` resolved),
    the task's number of outputs, ``model.kwargs``; one too large for this machine is refused first."""
    name, outputs = resolve_model_name(recipe, data), task_outputs(make_task(recipe, data))
    _check_size(name, tuple(data.input_shape), outputs, dict(recipe.model.kwargs))
    return build_model(name, data.input_shape, outputs, **recipe.model.kwargs)


def data_task_model(recipe: Recipe, dev: torch.device, dist: runtime.DistInfo,
                     fitted: dict[str, Any] | None = None) -> tuple[DataSplits, Task, Any, Any]:
    runtime.seed_everything(recipe.train.seed)
    data = build_data(recipe.data, recipe.task, fitted=fitted)
    probe_first_samples(data)  # a data set its transforms cannot handle fails now, not mid-run
    task = make_task(recipe, data)
    runtime.seed_everything(recipe.train.seed)  # model init does not depend on the data source's RNG use
    model = model_for(recipe, data)
    report = _load_weights(model, recipe, resolve_model_name(recipe, data)) if recipe.model.weights else None
    model.to(dev)
    if dist.distributed and recipe.dist.sync_bn:
        from trickbag.train.distributed import convert_sync_batchnorm

        model = convert_sync_batchnorm(model)  # torch's SyncBatchNorm, plus a CPU (gloo) path
    return data, task, model, report


def task_outputs(task: Task) -> int:
    """The model's outputs for ``task``: its classes, labels or regression targets."""
    n: Any = getattr(task, "num_classes", None) or getattr(task, "num_labels", None) or getattr(task, "num_targets", 1)
    return int(n)


def _optimizer_factory(recipe: Recipe, ctx: RunParts) -> None:
    """``ctx.optimizer_spec`` and ``ctx.optimizer_factory`` from the recipe's :mod:`trickbag.optim.optimizers` entry:
    a schedule-free optimizer takes the warm-up as its own ``warmup_steps``; one with a ``route`` (Muon) is built
    on the model's parameters it chooses."""
    from trickbag.optim import optimizers

    entry = optimizers.get(recipe.optim.name)
    cls, kwargs = ctx.optimizer_spec
    if entry.schedule_free:  # the warm-up belongs to the optimizer
        kwargs = {**kwargs, "warmup_steps": int(round(recipe.schedule.warmup_epochs * ctx.steps_per_epoch))}
        ctx.optimizer_spec = (cls, kwargs)
    ctx.optimizer_factory = (entry.route(recipe.optim, ctx.model, ctx.num_outputs, kwargs, ctx.notes)
                             if entry.route else functools.partial(cls, **kwargs))


def make_context(recipe: Recipe, data: DataSplits, task: Task, model: Any, dev: torch.device,
             dist: runtime.DistInfo) -> RunParts:
    train_loader = make_loader(data.train, recipe, train=True, dist=dist, device=dev)
    if len(train_loader) == 0:
        raise RecipeError(f"data.batch_size={recipe.data.batch_size} with drop_last leaves no training batch "
                          f"({len(cast(Sized, data.train))} samples)")
    eval_loader = lambda ds: make_loader(ds, recipe, train=False, dist=dist, device=dev) if ds is not None else None  # noqa: E731
    steps_per_epoch = math.ceil(len(train_loader) / recipe.train.accumulate)
    ctx = RunParts(
        recipe=recipe, data=data, task=task, model=model, device=dev, dist=dist, loss_fn=task.loss,
        train_loader=train_loader, val_loader=eval_loader(data.val), test_loader=eval_loader(data.test),
        steps_per_epoch=steps_per_epoch, total_steps=steps_per_epoch * recipe.train.epochs,
        num_outputs=task_outputs(task), param_groups=[{"params": [p for p in model.parameters() if p.requires_grad]}],
        optimizer_spec=optimizer_spec(recipe), clip=recipe.train.clip,
    )
    _optimizer_factory(recipe, ctx)
    if recipe.optim.lookahead_k:
        assert ctx.optimizer_factory is not None  # set just above
        ctx.optimizer_factory = _lookahead(recipe, ctx.optimizer_factory)
    ctx.checkpoint_extra["task"] = task.metadata()
    ctx.checkpoint_extra["preprocess"] = data.fitted  # the fitted preprocessing: predict/eval/export need no data
    ctx.notes += data.notes
    ctx.monitor, ctx.mode = resolve_monitor(recipe, task, ctx.val_loader is not None)
    return ctx



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


def _data_of(recipe: Recipe, ckpt: dict[str, Any], ckpt_path: Path, splits: bool) -> DataSplits:
    """The checkpoint's stored preprocessing (no data read), or with ``splits`` the recipe's data encoded with
    it; a checkpoint from before the state was stored rebuilds it from the data, which must then be there."""
    from trickbag.data.sources import restore

    state = ckpt.get("preprocess")
    if isinstance(state, dict) and not splits:
        return restore(state)
    try:
        return build_data(recipe.data, recipe.task, fitted=state if isinstance(state, dict) else None)
    except DataError as exc:
        if isinstance(state, dict):
            raise
        raise DataError(f"checkpoint {str(ckpt_path)!r} predates the stored preprocessing, so it needs its training "
                        f"data to rebuild it: {exc}") from None


def model_from_checkpoint(
    ckpt_path: Path, *, trust_code: bool = False, splits: bool = False
) -> tuple[Recipe, torch.nn.Module, dict[str, Any], DataSplits]:
    """Rebuild the model a run checkpoint names and load its evaluated weights (EMA/SWA if the run had them).

    The data come from the checkpoint's stored preprocessing (``"preprocess"``), without reading the
    training files; ``splits=True`` (evaluation on a split) builds the recipe's datasets, encoded with it.
    The checkpoint's recipe is data from a file that may come from anywhere: a
    ``package.module:function`` model name in it would import and run code, so it is refused unless
    ``trust_code`` (``--trust-model-code`` on the command line) says the user trusts the file.
    """
    ckpt = load_checkpoint(ckpt_path)
    if "recipe" not in ckpt or "model" not in ckpt:
        raise CheckpointError(f"checkpoint {str(ckpt_path)!r} is not a trickbag run checkpoint (no recipe/model)")
    if not isinstance(ckpt["recipe"], dict):
        raise CheckpointError(f"checkpoint {str(ckpt_path)!r} has a malformed recipe entry")
    recipe = recipe_from_dict(ckpt["recipe"], stored=True)  # maybe written before each schedule had its own keys
    if ":" in recipe.model.name and not trust_code:
        raise CheckpointError(
            f"checkpoint {str(ckpt_path)!r} names model code {recipe.model.name!r}; building it would import and run "
            "that code, so it is refused: pass --trust-model-code only if you trust where the file came from"
        )
    data = _data_of(recipe, ckpt, Path(ckpt_path), splits)
    model = model_for(recipe, data)
    weights = ckpt.get("eval_model") or ckpt["model"]
    check_state_fits(model, weights, f"checkpoint {str(ckpt_path)!r}")
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:
        raise CheckpointError(f"checkpoint {str(ckpt_path)!r} does not fit model {recipe.model.name!r}: "
                              f"{str(exc).splitlines()[0]}") from None
    return recipe, model.eval(), ckpt, data


def load_model(spec: str) -> torch.nn.Module:
    """A trained network named by a run checkpoint path or ``package.module:function`` (a teacher)."""
    path = Path(spec).expanduser()
    if path.is_file() or not is_callable_spec(spec):
        if not path.exists():
            raise RecipeError(f"{spec!r} does not exist; give a trickbag run checkpoint "
                              "(e.g. runs/NAME/checkpoints/best.pt) or package.module:function")
        return model_from_checkpoint(path)[1]
    model = import_callable(spec, "model")()
    if not isinstance(model, torch.nn.Module):
        raise RecipeError(f"{spec!r} returned {type(model).__name__}, not a torch.nn.Module")
    return model
