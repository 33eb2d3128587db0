"""The pieces of an optimizer update that are not its order (the order is the loop's, in ``trainer.py``):
precision's autocast, DDP / FSDP2 ``no_sync``, the checks and exceptions of a two-pass optimizer's closure, and
exact accumulation's loss weights (:class:`ExactAccumulation`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from trickbag.data.sampler import EpochSampler
from trickbag.plugin.state import State
from trickbag.train.bookkeeping import find_sampler

__all__ = [
    "ExactAccumulation",
    "Overflow",
    "VetoedUpdate",
    "autocast",
    "clip_gradients",
    "finite_grads",
    "no_sync",
    "unscale_second_pass",
]


class Overflow(Exception):
    """Raised inside an optimizer closure when fp16 gradients of the second pass overflowed: SAM puts the
    unperturbed weights back, the update is skipped and the scale backs off."""


class VetoedUpdate(Exception):
    """Raised inside an optimizer closure when the second pass was vetoed (non-finite); SAM puts the
    unperturbed weights back and the trainer counts the update as skipped."""


def finite_grads(optimizer: torch.optim.Optimizer) -> bool:
    """Whether every gradient the optimizer would use is finite (one host sync)."""
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    return not grads or bool(torch.isfinite(torch.nn.utils.get_total_norm(grads, foreach=True)))


def unscale_second_pass(optimizer: torch.optim.Optimizer, scaler: Any) -> None:
    """fp16 SAM: unscale the second pass's gradients by hand (a GradScaler unscales once per update, and the
    first pass used that) and raise :class:`Overflow` when they are not finite; nothing when ``scaler`` is off."""
    if scaler is None or not scaler.is_enabled():
        return
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    torch._foreach_mul_(grads, 1.0 / scaler.get_scale())
    if not finite_grads(optimizer):
        raise Overflow


def clip_gradients(optimizer: torch.optim.Optimizer, clip: Any) -> torch.Tensor | None:
    """Clip the optimizer's gradients: ``clip`` a max global norm (returns the norm before clipping), a function
    ``clip(params) -> norm or None``, or None (nothing done, None)."""
    if clip is None:
        return None
    params = [p for g in optimizer.param_groups for p in g["params"]]
    if callable(clip):
        return clip(params)
    return torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """Autocast for ``precision`` (``"bf16"``, ``"16"``); nothing for ``"32"``."""
    if precision == "32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def no_sync(model: Any, last: bool) -> contextlib.AbstractContextManager:
    """DDP / FSDP2: no gradient reduction on the micro-batches before the last one of an update."""
    if last:
        return contextlib.nullcontext()
    if hasattr(model, "no_sync"):
        return model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):
        return _gradient_sync_off(model)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _gradient_sync_off(model: Any) -> Iterator[None]:
    """FSDP2: gradients accumulate unreduced inside the block (its ``no_sync``)."""
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


class ExactAccumulation:
    """Exact accumulation: each micro-batch's loss weighted by its count (``Task.loss_count``) and the update
    divided by the count over its micro-batches and ranks, so uneven micro-batches give the big batch's gradient;
    full micro-batches keep the plain ``loss / accumulate``.

    Made at fit start: the nominal count of a micro-batch (the loader's batch size, the same on every rank) and
    whether every rank's micro-batches have the same sizes (trickbag's padded sampler), so none is all-reduced.
    """

    def __init__(self, state: State) -> None:
        self.state = state
        loader = state.train_loader
        self.nominal = int(getattr(loader, "batch_size", None) or 1)
        sampler = find_sampler(loader)
        self.equal_shards = isinstance(sampler, EpochSampler) and sampler.pad
        self.counted: int | torch.Tensor = 0

    def weighted(self, loss: torch.Tensor, size: int, *, whole: bool = True) -> torch.Tensor:
        """This micro-batch's (mean) loss weighted by its count over the update's nominal count (``size``
        loader batches of the nominal count); :meth:`normalise` corrects the update when the counts were not
        nominal, so that any split of a batch into micro-batches gives the big batch's gradient. ``whole``: the
        micro-batch is its whole loader batch (``train.micro_batch_size`` did not split it)."""
        s = self.state
        if size == 1 and whole and not s.dist.distributed:
            return loss  # one micro-batch in one process: its mean loss is the update's (no count needed)
        n = s.task.loss_count(s.output, s.batch[1])
        if size == 1 and whole and self.equal_shards and isinstance(n, int):
            return loss  # one micro-batch, the same count on every rank
        self.counted = self.counted + n
        if whole and isinstance(n, int) and n == self.nominal:
            return loss / size  # the usual case: a plain loss / accumulate
        return loss * (n / (self.nominal * size))

    def normalise(self, size: int) -> None:
        """Scale the update's gradients by its nominal count over the count it saw (summed over ranks unless
        the shards are equal): exact when micro-batches differ in size (a short last batch, uneven shards, a
        token count). Nothing to do, and no sync, when every micro-batch was full."""
        s = self.state
        counted, nominal = self.counted, self.nominal * size
        self.counted = 0
        if isinstance(counted, int) and counted == 0:
            return  # nothing weighted (one micro-batch per update, see weighted)
        if s.dist.distributed and (isinstance(counted, torch.Tensor) or not self.equal_shards):
            total = torch.as_tensor(counted, dtype=torch.float64, device=s.device).reshape(())
            torch.distributed.all_reduce(total)
            counted, nominal = total, nominal * s.dist.world_size
        elif isinstance(counted, int) and counted == nominal:
            return
        grads = [p.grad for g in s.optimizer.param_groups for p in g["params"] if p.grad is not None]
        if grads:
            factor = nominal / counted
            torch._foreach_mul_(grads, factor.float() if isinstance(factor, torch.Tensor) else factor)
