"""From a recipe to a ready :class:`Trainer`: the parts (:mod:`trickbag.train.parts`), the tricks set up on them,
the optimizer and schedule, the plug-ins.

Everything that can fail on bad input is built before anything is written, so a bad recipe leaves no run
directory behind.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from trickbag import runtime
from trickbag.errors import RecipeError
from trickbag.plugin.assemble import LegacyContext, assemble
from trickbag.plugin.context import TrickContext
from trickbag.plugin.interface import Plugin
from trickbag.recipe import Recipe
from trickbag.train.parts import (
    RunParts,
    build_schedule,
    data_task_model,
    make_context,
    trick_context,
    user_plugins,
    wrap_ddp,
)
from trickbag.train.threads import ThreadCheck, apply_threads
from trickbag.train.trainer import Trainer
from trickbag.tricks import build_tricks

__all__ = ["build"]


def _set_up(recipe: Recipe, ctx: RunParts, tricks: list[Plugin], mine: list[Plugin]) -> None:
    """Set up the tricks' plug-ins and the recipe's own (``train.plugins``) that have build-time seams on the
    :class:`TrickContext` of ``ctx`` (:func:`~trickbag.plugin.assemble.assemble`): the model wrapped for DDP or
    sharded for FSDP between ``configure`` and the optimizer; the schedule in optimizer updates. The recipe's own
    plug-ins run last (the run path adds them after every other plug-in)."""
    tctx = trick_context(ctx)
    done = assemble(tctx, tricks, mine, before_optimizer=lambda t: _distribute(recipe, t, ctx),
                    schedule=lambda opt: build_schedule(recipe, opt, ctx.steps_per_epoch, ctx.notes, ctx.mode),
                    legacy=lambda t: LegacyContext(t, ctx), notes=ctx.notes, sampler=True)
    if tctx.sample_weights is not None:
        ctx.train_loader.sampler.set_weights(tctx.sample_weights)
    ctx.model, ctx.loss_fn, ctx.param_groups, ctx.clip = tctx.model, tctx.loss_fn, tctx.param_groups, tctx.clip
    ctx.optimizer_factory, ctx.optimizer, ctx.scheduler = tctx.make_optimizer, done.optimizer, done.scheduler
    ctx.plugins = list(tricks) + ctx.plugins
    if recipe.train.early_stopping_patience:
        from trickbag.train.plugins.early_stopping import EarlyStop

        ctx.plugins.append(EarlyStop(ctx.monitor, ctx.mode, recipe.train.early_stopping_patience,
                                     recipe.train.early_stopping_min_delta))


def _distribute(recipe: Recipe, ctx: TrickContext, parts: RunParts) -> None:
    """After ``configure``: FSDP2 sharding or the DDP wrapper, then each rank's own random stream."""
    if recipe.dist.strategy == "fsdp":
        _shard(recipe, ctx, parts)
    elif parts.dist.world_size > 1:
        ctx.model = wrap_ddp(ctx.model, parts.device)
    if parts.dist.world_size > 1:
        from trickbag.train.distributed import seed_rank

        # every rank built the same model from train.seed (and DDP broadcast rank 0's weights);
        # from here on each rank draws its own augmentations / dropout masks
        seed_rank(recipe.train.seed, ctx.rank)


def _spike_guard(recipe: Recipe) -> Any:
    """``train.spike`` and its keys as a :class:`~trickbag.train.spike.SpikeGuard` (None when off)."""
    t = recipe.train
    if t.spike == "off":
        return None
    from trickbag.train.spike import SpikeGuard

    if t.spike_warmup > t.spike_window:
        raise RecipeError(f"train.spike_warmup={t.spike_warmup} must not exceed train.spike_window={t.spike_window}")
    return SpikeGuard(t.spike, window=t.spike_window, warmup=t.spike_warmup, ratio=t.spike_ratio,
                      quantile=t.spike_quantile, floor=t.spike_floor, rollback_after=t.spike_rollback_after,
                      rollback_within=t.spike_rollback_within, snapshot_every=t.spike_snapshot_every,
                      lr_factor=t.spike_lr_factor, lr_updates=t.spike_lr_updates, snapshot_on=t.spike_snapshot_on,
                      max_snapshot_gb=t.spike_max_snapshot_gb, out=sys.stderr if runtime.dist_info().is_main else None)


def _check_sharding(recipe: Recipe) -> None:
    """``dist.strategy=fsdp``: the optimizers that cannot run on shards (their :mod:`trickbag.optim.optimizers`
    entry's ``no_fsdp``), refused before anything is built."""
    from trickbag.optim import optimizers

    if recipe.dist.strategy != "fsdp":
        return
    why = optimizers.get(recipe.optim.name).no_fsdp
    if why:
        raise RecipeError(f"optim.name={recipe.optim.name} is refused with dist.strategy=fsdp: {why}; use adamw, "
                          "sgd, lion or schedulefree_adamw, or dist.strategy=ddp")
    if recipe.optim.lookahead_k:
        raise RecipeError("optim.lookahead_k is refused with dist.strategy=fsdp: Lookahead copies its slow weights "
                          "with an operation sharded tensors do not support; set optim.lookahead_k=0, or use "
                          "dist.strategy=ddp")
    if recipe.train.micro_batch_size == "auto":
        raise RecipeError("train.micro_batch_size=auto is refused with dist.strategy=fsdp: FSDP's forward gathers "
                          "weights, a collective an out-of-memory error on one process would leave the others "
                          "waiting in; give a number of samples, or use dist.strategy=ddp")


def _shard(recipe: Recipe, ctx: TrickContext, parts: RunParts) -> None:
    """``dist.strategy=fsdp``: FSDP2 over every process (a group of one in a single process), the param groups
    moved onto the sharded parameters by name."""
    import torch.distributed as tdist

    from trickbag.train.sharded import remap_param_groups, shard_model

    d = recipe.dist
    if d.param_dtype != "float32" and recipe.train.precision == "32" and any(
            isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in ctx.model.modules()):
        raise RecipeError(f"dist.param_dtype={d.param_dtype} casts the weights but not the BatchNorm statistics, and "
                          "without autocast the layers would meet float32 and half tensors; set train.precision="
                          f"{'bf16' if d.param_dtype == 'bfloat16' else '16'} too, or dist.param_dtype=float32")
    if not tdist.is_initialized():
        raise RecipeError("dist.strategy=fsdp needs a process group: run through `trickbag train` (which opens one "
                          "in a single process) or torchrun")
    names = {id(p): n for n, p in ctx.model.named_parameters()}
    units = shard_model(ctx.model, parts.device, classes=d.shard_modules, reshard_after_forward=d.reshard_after_forward,
                        param_dtype=d.param_dtype, reduce_dtype=d.reduce_dtype)
    if d.shard_modules and not units:
        raise RecipeError(f"dist.shard_modules={d.shard_modules}: the model ({type(ctx.model).__name__}) has no module "
                          "of these classes; allowed: class names of its blocks, or [] for its repeated blocks")
    ctx.param_groups = remap_param_groups(ctx.param_groups, names, ctx.model)
    world = tdist.get_world_size()
    parts.notes.append(f"fsdp: {len(units)} blocks and the root sharded over {world} process"
                       f"{'es' if world > 1 else ''} (weights, gradients and optimizer state: 1/{world} each; "
                       f"gathered in {d.param_dtype}, gradients reduced in {d.reduce_dtype})")


def _checkpoint_activations(recipe: Recipe, ctx: RunParts) -> None:
    """``train.activation_checkpointing``: the model's repeated blocks recompute their activations in backward
    (before the tricks see the model: a copy, a compiled or DDP-wrapped model keeps the checkpointing)."""
    mode = recipe.train.activation_checkpointing
    if mode == "none":
        return
    from trickbag.nn.activation_checkpointing import checkpoint_blocks, describe_blocks, find_blocks

    key = f"train.activation_checkpointing={mode}"
    found = find_blocks(ctx.model)
    if not found:
        raise RecipeError(f"{key}: the model ({type(ctx.model).__name__}) has no repeated blocks to checkpoint (no "
                          "nn.Sequential or nn.ModuleList of blocks with layers of their own); allowed: none, or a "
                          "model with such blocks (digits_cnn, small_cnn, signal_cnn, fast_signal_cnn, resnet18, ...)")
    every = recipe.train.activation_checkpointing_every if mode == "every_k" else 1
    try:
        names = checkpoint_blocks(ctx.model, every=every, blocks=found)
    except ValueError as exc:
        raise RecipeError(f"{key}: {exc}") from None
    ctx.notes.append(f"activation checkpointing: {len(names)} of {len(found)} blocks recompute their activations in "
                     f"backward ({describe_blocks(ctx.model, names)})")


def build(recipe: Recipe, *, run_dir: Path | None = None, device: str | None = None,
          fitted: dict[str, Any] | None = None) -> tuple[Trainer, RunParts]:
    """Build the trainer for ``recipe`` (nothing is written; the caller adds file-writing plug-ins).

    ``fitted``: the preprocessing state a checkpoint stored (``"preprocess"``, a resume): the data are
    encoded with it instead of a new fit on the files."""
    dist = runtime.dist_info()
    runtime.configure_determinism(recipe.train.deterministic, recipe.train.benchmark)
    auto, threads = apply_threads(recipe.train.threads, recipe.train.deterministic)
    dev = runtime.select_device(device or recipe.train.device, local_rank=dist.local_rank)
    tricks = build_tricks(recipe)  # validates the tricks section before any data is touched
    _check_sharding(recipe)
    mine = user_plugins(recipe.train.plugins)
    data, task, model, report = data_task_model(recipe, dev, dist, fitted)
    ctx = make_context(recipe, data, task, model, dev, dist)
    ctx.threads = threads
    if auto is not None:  # decided over the time the data and model took to build
        ctx.threads_check = ThreadCheck(auto)
        ctx.plugins.append(ctx.threads_check)
        ctx.notes.append(f"threads: {ctx.threads_check.report()}")
    if report is not None:
        ctx.weights_report = report
        ctx.notes.append(f"model.weights: {report}")
    _checkpoint_activations(recipe, ctx)
    _set_up(recipe, ctx, tricks, mine)
    ctx.user_plugins = mine
    assert ctx.optimizer is not None  # built by _set_up
    trainer = Trainer(
        ctx.model, ctx.optimizer, ctx.train_loader, ctx.val_loader, task=task, loss_fn=ctx.loss_fn,
        scheduler=ctx.scheduler, plugins=ctx.plugins, max_epochs=recipe.train.epochs,
        precision=recipe.train.precision, accumulate=recipe.train.accumulate, clip=ctx.clip, device=dev,
        monitor=ctx.monitor, mode=ctx.mode, eval_every=recipe.train.eval_every,
        nonfinite=recipe.train.nonfinite, max_nonfinite=recipe.train.max_nonfinite,
        micro_batch_size=recipe.train.micro_batch_size, spike=_spike_guard(recipe),
    )
    trainer.state.run_dir = run_dir  # the run path adds the run folder's plug-ins itself
    return trainer, ctx

