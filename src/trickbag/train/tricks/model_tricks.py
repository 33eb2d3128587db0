"""Recipe tricks on the model and its parameters: freeze / unfreeze, parameter groups, layer-wise LR
decay, multi-scale / FixRes resizing, channels-last, torch.compile.

Thin adapters over :mod:`trickbag.nn` (``freeze``, ``unfreeze``, ``param_groups``) and torch.  The
build-time changes happen in ``configure(ctx)``, in this order: freeze (frozen parameters leave
``ctx.param_groups``), parameter groups, then the model wrappers (channels-last, compile).

Unfreezing at ``tricks.freeze.unfreeze_epoch`` adds the parameters back with
``optimizer.add_param_group``: grouped as the recipe groups them (no-decay, ``lr_scale``, layer
decay), each group's base LR recorded as ``initial_lr`` and its current LR set to where the recipe's
schedule is now for that base LR, and the scheduler told about the new groups, so they follow the
same curve from there on.  A checkpoint taken after the unfreeze records it; on resume the groups
are added back before the optimizer state is loaded.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F

from trickbag.config import Recipe
from trickbag.errors import ConflictError, RecipeError
from trickbag.nn import freeze, param_groups, unfreeze
from trickbag.train.plugin import Plugin
from trickbag.train.state import State
from trickbag.train.trainer import _unwrap
from trickbag.train.tricks import INTERACTION_CHECKS, register_trick

__all__ = [
    "FreezePlugin",
    "ParamGroupsPlugin",
    "MultiscalePlugin",
    "ChannelsLastPlugin",
    "CompilePlugin",
    "recipe_param_groups",
    "layer_id_by_depth",
]


# --------------------------------------------------------------------------- parameter groups
def layer_id_by_depth(model: torch.nn.Module, depth: int) -> Callable[[str], int]:
    """Layer id of a parameter = rank of its module path cut to ``depth`` names, in parameter order.

    ``depth=1`` numbers the top-level children (``features`` 0, ``head`` 1); ``depth=2`` the
    blocks inside them (``features.0``, ``features.1``, ..., ``head``).  Parameters registered
    on ``model`` itself share the id of the first layer.  Frozen parameters are counted too, so
    ids do not change when they are unfrozen.

    >>> m = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2)),
    ...                         torch.nn.Linear(2, 1))
    >>> f = layer_id_by_depth(m, 2)
    >>> [f(n) for n, _ in m.named_parameters()]
    [0, 0, 1, 1, 2, 2]
    """
    ranks: dict[str, int] = {}

    def key(name: str) -> str:
        return ".".join(name.split(".")[:-1][:depth])

    for name, _ in model.named_parameters():
        ranks.setdefault(key(name), len(ranks))
    return lambda name: ranks.get(key(name), 0)


def recipe_param_groups(model: torch.nn.Module, recipe: Recipe) -> list[dict[str, Any]]:
    """Optimizer groups of ``model``'s trainable parameters as the recipe's tricks define them.

    With ``tricks.param_groups`` and/or ``tricks.layer_decay`` on: :func:`trickbag.nn.param_groups`
    (each group with ``lr``, ``weight_decay``, ``name`` and ``param_names``); otherwise one group
    holding every trainable parameter at the optimizer's defaults.

    >>> from trickbag.config import load_recipe
    >>> r = load_recipe("digits", ["tricks.param_groups.enabled=true", "tricks.param_groups.lr_scale={'1.*': 10}"])
    >>> groups = recipe_param_groups(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)), r)
    >>> [(g["name"], g["lr"], g["weight_decay"]) for g in groups]
    [('decay', 0.05, 0.0005), ('no_decay', 0.05, 0.0), ('lr_scale[1.*]/decay', 0.5, 0.0005), ('lr_scale[1.*]/no_decay', 0.5, 0.0)]
    """
    pg, ld = recipe.tricks.param_groups, recipe.tricks.layer_decay
    if not (pg.enabled or ld.enabled):
        return [{"params": [p for p in model.parameters() if p.requires_grad]}]
    try:
        return param_groups(
            model,
            lr=recipe.optim.lr,
            weight_decay=recipe.optim.weight_decay,
            no_decay_bias_norm=pg.no_decay_bias_norm if pg.enabled else False,
            lr_scale=dict(pg.lr_scale) if pg.enabled and pg.lr_scale else None,
            layer_decay=ld.decay if ld.enabled else None,
            layer_id_fn=layer_id_by_depth(model, ld.depth) if ld.enabled else None,
        )
    except ValueError as exc:
        key = "tricks.param_groups" if pg.enabled else "tricks.layer_decay"
        raise RecipeError(f"{key}: {exc}") from None


class ParamGroupsPlugin(Plugin):
    """Replace ``ctx.param_groups`` by :func:`recipe_param_groups` (``tricks.param_groups`` / ``layer_decay``)."""

    name = "param_groups"

    def __init__(self, recipe: Recipe) -> None:
        self.recipe = recipe

    def configure(self, ctx: Any) -> None:
        ctx.param_groups = recipe_param_groups(_unwrap(ctx.model), self.recipe)
        lrs = sorted({round(float(g["lr"]), 12) for g in ctx.param_groups})
        ctx.notes.append(f"param groups: {len(ctx.param_groups)} ({', '.join(g['name'] for g in ctx.param_groups)}); "
                         f"learning rates {lrs}")


# --------------------------------------------------------------------------- freeze / unfreeze
def _scheduled_lr(recipe: Recipe, steps_per_epoch: int, base_lr: float, step: int) -> Optional[float]:
    """LR the recipe's schedule gives a group with base LR ``base_lr`` after ``step`` updates (None: plateau)."""
    from trickbag.train.build import build_schedule

    if recipe.schedule.name == "plateau":
        return None
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stepping a schedule without optimizer steps is the point here
        try:
            sched = build_schedule(recipe, opt, steps_per_epoch)
        except (ValueError, RecipeError):
            return None
        for _ in range(step):
            sched.step()
    return float(opt.param_groups[0]["lr"])


def _extend_scheduler(scheduler: Any, optimizer: torch.optim.Optimizer, group: dict[str, Any]) -> None:
    """Tell ``scheduler`` (and the schedulers it chains) about a param group just added to ``optimizer``."""
    if scheduler is None:
        return
    scheds = [scheduler] + list(getattr(scheduler, "_schedulers", []))
    for s in scheds:
        if isinstance(s, torch.optim.lr_scheduler.OneCycleLR):
            g0 = optimizer.param_groups[0]
            base = group["initial_lr"]
            group["max_lr"] = base
            group["initial_lr"] = base * g0["initial_lr"] / g0["max_lr"]
            group["min_lr"] = base * g0["min_lr"] / g0["max_lr"]
            group.update({k: g0[k] for k in ("base_momentum", "max_momentum") if k in g0})
        if isinstance(getattr(s, "base_lrs", None), list):
            s.base_lrs.append(group["initial_lr"])
        if isinstance(getattr(s, "_last_lr", None), list):
            s._last_lr.append(group["lr"])


class FreezePlugin(Plugin):
    """Freeze parameters by pattern (:func:`trickbag.nn.freeze`) before the optimizer is built, so they are
    not in it; at ``unfreeze_epoch`` unfreeze them and add them to the optimizer with the LR the
    recipe's grouping and schedule give them at that point."""

    name = "freeze"

    def __init__(self, patterns: list[str], regex: bool, bn_stats: bool, unfreeze_epoch: Optional[int],
                 recipe: Recipe) -> None:
        self.patterns, self.regex, self.bn_stats = list(patterns), regex, bn_stats
        self.unfreeze_epoch = unfreeze_epoch
        self.recipe = recipe
        self.frozen: list[str] = []
        self.unfrozen = False
        self._model: Optional[torch.nn.Module] = None
        self._optimizer: Optional[torch.optim.Optimizer] = None
        self._scheduler: Any = None
        self._steps_per_epoch = 1
        self._ref: Optional[tuple[float, float]] = None  # (lr, initial lr) source for the plateau schedule

    def configure(self, ctx: Any) -> None:
        model = _unwrap(ctx.model)
        try:
            self.frozen = freeze(model, self.patterns, freeze_bn_stats=self.bn_stats, regex=self.regex)
        except (ValueError, TypeError) as exc:
            raise RecipeError(f"tricks.freeze.patterns: {exc}") from None
        if self.unfreeze_epoch is not None and ctx.dist.distributed:
            raise ConflictError(
                "tricks.freeze.unfreeze_epoch cannot be used under DDP (it fixes the trainable parameters when it "
                "wraps the model); train the two stages as two runs, the second with model.weights=<first best.pt>"
            )
        groups = []
        for g in ctx.param_groups:
            params = [p for p in g["params"] if p.requires_grad]
            if params:
                groups.append({**g, "params": params})
        if not groups:
            raise RecipeError(
                f"tricks.freeze.patterns={self.patterns} freezes every parameter; leave some trainable (e.g. the head)"
            )
        ctx.param_groups = groups
        self._model = model
        n = sum(p.numel() for p in model.parameters() if not p.requires_grad)
        when = f", unfrozen at epoch {self.unfreeze_epoch + 1}" if self.unfreeze_epoch is not None else ""
        ctx.notes.append(f"freeze: {len(self.frozen)} tensors ({n:,} values) frozen{when}")

    def after_optimizer(self, ctx: Any) -> None:
        self._optimizer, self._scheduler = ctx.optimizer, ctx.scheduler
        self._steps_per_epoch = ctx.steps_per_epoch
        g0 = ctx.optimizer.param_groups[0]
        self._ref = (float(g0["lr"]), float(g0.get("initial_lr", g0["lr"])))

    def on_epoch_start(self, state: State) -> None:
        if self.unfreeze_epoch is not None and not self.unfrozen and state.epoch >= self.unfreeze_epoch:
            self._unfreeze(state.optimizer, state.scheduler, state.step)

    def _unfreeze(self, optimizer: torch.optim.Optimizer, scheduler: Any, step: int) -> None:
        if self._model is None:
            raise RuntimeError("FreezePlugin.configure(ctx) must run before the unfreeze epoch")
        frozen_ids = {id(p) for p in self._model.parameters() if not p.requires_grad}
        unfreeze(self._model, self.patterns, regex=self.regex)
        self.unfrozen = True
        g0 = optimizer.param_groups[0]
        for g in recipe_param_groups(self._model, self.recipe):
            params = [p for p in g["params"] if id(p) in frozen_ids]
            if not params:
                continue
            group = dict(g, params=params)
            if "param_names" in g:
                names = dict(zip(map(id, g["params"]), g["param_names"]))
                group["param_names"] = [names[id(p)] for p in params]
            base = float(group.get("lr", self.recipe.optim.lr))
            lr = _scheduled_lr(self.recipe, self._steps_per_epoch, base, step) if scheduler is self._scheduler else None
            if lr is None:  # plateau (or a schedule replaced by another trick): follow the first group's factor
                lr = base * float(g0["lr"]) / self._ref[1] if self._ref and self._ref[1] else base
            group["initial_lr"], group["lr"] = base, lr
            optimizer.add_param_group(group)
            _extend_scheduler(scheduler, optimizer, optimizer.param_groups[-1])

    def state_dict(self) -> dict[str, Any]:
        return {"unfrozen": self.unfrozen}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        # called before the optimizer state is loaded: add the groups back so the optimizer state fits
        if sd.get("unfrozen") and not self.unfrozen and self._optimizer is not None:
            self._unfreeze(self._optimizer, self._scheduler, 0)


# --------------------------------------------------------------------------- multi-scale / FixRes
def _image_shape(ctx: Any, trick: str) -> tuple[int, ...]:
    shape = tuple(ctx.data.input_shape)
    if len(shape) != 3:
        raise RecipeError(
            f"tricks.{trick} works on image batches [N, C, H, W]; data {ctx.recipe.data.name!r} has samples of "
            f"shape {list(shape)}"
        )
    return shape


def _resize(x: torch.Tensor, size: tuple[int, int], mode: str) -> torch.Tensor:
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    smooth = mode in ("bilinear", "bicubic")
    return F.interpolate(x, size=size, mode=mode, align_corners=False if smooth else None, antialias=smooth)


class MultiscalePlugin(Plugin):
    """Resize training batches at BATCH_START (``F.interpolate``): to ``train_sizes`` (one drawn per
    batch when several, reproducibly from ``(train.seed, epoch, batch)``), and to the test size in
    the last ``finetune_epochs`` epochs (FixRes, Touvron et al. 2019); evaluation at the test size
    (``state.predict`` wrapped at EVAL_START, restored at EVAL_END)."""

    name = "multiscale"

    def __init__(self, train_sizes: list[int], test_size: Optional[int], finetune_epochs: int, mode: str,
                 epochs: int, seed: int) -> None:
        self.train_sizes = [int(s) for s in train_sizes]
        self.test_size = test_size
        # a quick `train.epochs=1` try keeps its one epoch at the training sizes
        self.finetune_from = max(1, epochs - finetune_epochs) if epochs > 1 else 1
        self.requested = (finetune_epochs, epochs)
        self.mode, self.seed = mode, seed
        self.native: tuple[int, int] = (0, 0)
        self._prev: Any = None

    def configure(self, ctx: Any) -> None:
        self.native = tuple(_image_shape(ctx, "multiscale")[1:])  # type: ignore[assignment]
        ts = self.test or self.native
        ft, epochs = self.requested
        tune = f", fine-tune at it from epoch {self.finetune_from + 1}" if self.finetune_from < epochs else ""
        short = f" (finetune_epochs={ft} shortened: the run has {epochs} epochs)" if ft and ft >= epochs else ""
        ctx.notes.append(f"multiscale: train at {self.train_sizes}, evaluate at {ts[0]}x{ts[1]}{tune}{short}")

    @property
    def test(self) -> Optional[tuple[int, int]]:
        return (self.test_size, self.test_size) if self.test_size else None

    def size_for(self, epoch: int, batch_idx: int) -> tuple[int, int]:
        """Input size of the training batch ``batch_idx`` of ``epoch``."""
        if epoch >= self.finetune_from:
            return self.test or self.native
        if len(self.train_sizes) == 1:
            s = self.train_sizes[0]
        else:
            g = torch.Generator().manual_seed(hash((self.seed, epoch, batch_idx)) & 0x7FFF_FFFF_FFFF_FFFF)
            s = self.train_sizes[int(torch.randint(len(self.train_sizes), (1,), generator=g))]
        return (s, s)

    def on_batch_start(self, state: State) -> None:
        b = state.batch
        x = _resize(b[0], self.size_for(state.epoch, state.batch_idx), self.mode)
        state.batch = (x, *b[1:])

    def on_eval_start(self, state: State) -> None:
        self._prev = state.predict
        if self.test is None:
            return
        inner = state.predict or state.model
        size, mode = self.test, self.mode
        state.predict = lambda x: inner(_resize(x, size, mode))

    def on_eval_end(self, state: State) -> None:
        state.predict = self._prev
        self._prev = None


# --------------------------------------------------------------------------- channels-last, compile
class ChannelsLastPlugin(Plugin):
    """Model and 4-D batches in ``torch.channels_last`` memory format (training and evaluation)."""

    name = "channels_last"

    def __init__(self) -> None:
        self._prev: Any = None

    def configure(self, ctx: Any) -> None:
        _image_shape(ctx, "channels_last")
        ctx.model = ctx.model.to(memory_format=torch.channels_last)

    def on_batch_start(self, state: State) -> None:
        x = state.batch[0]
        if x.dim() == 4:
            state.batch = (x.contiguous(memory_format=torch.channels_last), *state.batch[1:])

    def on_eval_start(self, state: State) -> None:
        self._prev = state.predict
        inner = state.predict or state.model
        state.predict = lambda x: inner(x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x)

    def on_eval_end(self, state: State) -> None:
        state.predict = self._prev
        self._prev = None


class CompilePlugin(Plugin):
    """``torch.compile`` the model in ``configure``; checkpoints keep the plain module's keys (the trainer
    unwraps ``_orig_mod``)."""

    name = "compile"

    def __init__(self, backend: str, mode: str, dynamic: Optional[bool], fullgraph: bool) -> None:
        self.backend, self.mode, self.dynamic, self.fullgraph = backend, mode, dynamic, fullgraph

    def configure(self, ctx: Any) -> None:
        ctx.model = torch.compile(ctx.model, backend=self.backend, mode=None if self.mode == "default" else self.mode,
                                  dynamic=self.dynamic, fullgraph=self.fullgraph)
        ctx.notes.append(f"torch.compile (backend {self.backend}, mode {self.mode}): the first updates are slow")


# --------------------------------------------------------------------------- registry
@register_trick("freeze", "Freeze parameters by name pattern (not in the optimizer); optional unfreeze epoch adds them back")
def _freeze(cfg: Any, recipe: Recipe) -> list[Plugin]:
    if cfg.unfreeze_epoch is not None and cfg.unfreeze_epoch >= recipe.train.epochs:
        raise RecipeError(
            f"tricks.freeze.unfreeze_epoch={cfg.unfreeze_epoch} is not before the end of training "
            f"(train.epochs={recipe.train.epochs}); "
            + (f"use an epoch in [1, {recipe.train.epochs - 1}] or None" if recipe.train.epochs > 1 else
               "a 1-epoch run cannot unfreeze: set train.epochs >= 2 or tricks.freeze.unfreeze_epoch=null")
        )
    return [FreezePlugin(cfg.patterns, cfg.regex, cfg.bn_stats, cfg.unfreeze_epoch, recipe)]


@register_trick("param_groups", "Parameter groups: no weight decay on biases/norms, LR factor per name pattern")
def _param_groups(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [ParamGroupsPlugin(recipe)]


@register_trick("layer_decay", "Layer-wise LR decay: LR x decay^(layers above), top layer at the full LR (Clark 2020)")
def _layer_decay(cfg: Any, recipe: Recipe) -> list[Plugin]:
    # one plug-in builds the groups for both sections
    return [] if recipe.tricks.param_groups.enabled else [ParamGroupsPlugin(recipe)]


@register_trick("multiscale", "Multi-scale / FixRes: train on resized batches, fine-tune and evaluate at the test size")
def _multiscale(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [MultiscalePlugin(cfg.train_sizes, cfg.test_size, cfg.finetune_epochs, cfg.mode, recipe.train.epochs,
                             recipe.train.seed)]


@register_trick("channels_last", "Channels-last memory format for the model and image batches")
def _channels_last(cfg: Any, recipe: Recipe) -> list[Plugin]:
    return [ChannelsLastPlugin()]


@register_trick("compile", "torch.compile the model (off by default); checkpoint keys stay those of the plain model")
def _compile(cfg: Any, recipe: Recipe) -> list[Plugin]:
    import torch._dynamo

    backends = torch._dynamo.list_backends(exclude_tags=())
    if cfg.backend not in backends:
        raise RecipeError(f"tricks.compile.backend={cfg.backend!r} is not a torch.compile backend; allowed: "
                          f"{', '.join(sorted(backends))}")
    return [CompilePlugin(cfg.backend, cfg.mode, cfg.dynamic, cfg.fullgraph)]


def _check_unfreeze_ddp(recipe: Recipe) -> None:
    f = recipe.tricks.freeze
    if f.enabled and f.unfreeze_epoch is not None and recipe.dist.nproc > 1:
        raise ConflictError(
            "tricks.freeze.unfreeze_epoch cannot be used with dist.nproc > 1 (DDP fixes the trainable parameters "
            "when it wraps the model); train the two stages as two runs, the second with model.weights=<first best.pt>"
        )


INTERACTION_CHECKS.append(_check_unfreeze_ddp)
