"""Helpers for multi-process training (torchrun / DDP): agreement between ranks, per-rank seeds,
batch-size reporting and a SyncBatchNorm that also runs on the CPU (gloo).

Every helper is a no-op in a single-process run, so the trainer calls them unconditionally.
Collectives must be called by every rank at the same point of the program; the functions here
that communicate say so.

>>> world_size()  # outside torchrun
1
>>> rank_seed(7, rank=1)
8
>>> effective_batch_size(32, accumulate=2, world_size=4)
256
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from trickbag import runtime

__all__ = [
    "is_distributed",
    "world_size",
    "barrier",
    "broadcast_object",
    "on_main",
    "any_rank",
    "agree_stop",
    "rank_seed",
    "seed_rank",
    "reseed_after_resume",
    "effective_batch_size",
    "scaling_notes",
    "SyncBatchNorm",
    "convert_sync_batchnorm",
]

T = TypeVar("T")


# --------------------------------------------------------------------------- basics
def is_distributed() -> bool:
    """True inside an initialised process group with more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    """Number of processes in the job (1 outside torchrun)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


_CONTROL_GROUP: tuple[Any, Any] = (None, None)  # (default group it belongs to, gloo group)


def _control_group() -> Any:
    """A CPU (gloo) group for small control messages, so a flag never costs a GPU sync.

    Collective on first use under NCCL (``new_group`` must be called by every rank); made again
    if the default group was destroyed and initialised anew.
    """
    global _CONTROL_GROUP
    if dist.get_backend() == "gloo":
        return None  # the default group already works on CPU tensors
    world = dist.group.WORLD
    if _CONTROL_GROUP[0] is not world:
        _CONTROL_GROUP = (world, dist.new_group(backend="gloo"))
    return _CONTROL_GROUP[1]


def barrier() -> None:
    """Wait until every rank gets here (collective; no-op in a single process)."""
    if is_distributed():
        dist.barrier(group=_control_group())


def broadcast_object(obj: T, src: int = 0) -> T:
    """Rank ``src``'s ``obj`` on every rank (pickled; collective; identity in a single process).

    >>> broadcast_object({"a": 1})
    {'a': 1}
    """
    if not is_distributed():
        return obj
    box = [obj if dist.get_rank() == src else None]
    dist.broadcast_object_list(box, src=src, group=_control_group())
    return cast(T, box[0])  # src's obj, now on every rank


def on_main(fn: Callable[[], T]) -> T:
    """Run ``fn`` on rank 0 only and hand its result, or the exception it raised, to every rank.

    ``fn``'s result must be picklable. Use it for decisions all ranks must share: the run directory's name, which
    checkpoint to resume
    from (rank 1 never scans or reads the run directory, so no shared file system is needed and no
    rank reads a file another one is still writing). Collective.

    >>> on_main(lambda: 2 + 2)
    4
    """
    if not is_distributed():
        return fn()
    outcome: tuple[bool, Any] = (True, None)
    if dist.get_rank() == 0:
        try:
            outcome = (True, fn())
        except Exception as exc:  # handed to every rank, raised there too
            try:
                pickle.loads(pickle.dumps(exc))
                outcome = (False, exc)
            except Exception:  # an exception that does not survive pickling: send its text instead
                outcome = (False, RuntimeError(f"rank 0 failed: {type(exc).__name__}: {exc}"))
    ok, value = broadcast_object(outcome)
    if not ok:
        raise value
    return value


def any_rank(flag: bool) -> bool:
    """Whether ``flag`` is true on at least one rank (an all-reduce MAX on the CPU; collective).

    >>> any_rank(False), any_rank(True)
    (False, True)
    """
    if not is_distributed():
        return bool(flag)
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=_control_group())
    return bool(t.item())


def agree_stop(state: Any) -> bool:
    """Make every rank stop when any rank asked to (``state.should_stop``); returns the shared decision.

    When some rank stops, every rank takes the same stop reason and detail (an interruption wins,
    so all ranks take the interrupted path together; otherwise the lowest stopping rank's), so the
    trainer follows the same branches, and the same collectives, on every rank. Collective; in a
    single process it returns ``state.should_stop`` unchanged.
    """
    if not is_distributed():
        return bool(state.should_stop)
    if not any_rank(bool(state.should_stop)):
        return False
    from trickbag.plugin.state import StopReason

    reasons: list[Any] = [None] * dist.get_world_size()
    mine = ((state.stop_reason or StopReason.REQUESTED).value, state.stop_detail) if state.should_stop else None
    dist.all_gather_object(reasons, mine, group=_control_group())
    given = [r for r in reasons if r is not None]
    interrupted = [r for r in given if r[0] == StopReason.INTERRUPTED.value]
    reason, detail = interrupted[0] if interrupted else given[0]
    state.should_stop = True
    state.stop_reason, state.stop_detail = StopReason(reason), detail
    return True


# --------------------------------------------------------------------------- seeds
def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank``'s augmentation / global RNG: ``seed + rank``.

    The model is built from ``seed`` on every rank (and DDP broadcasts rank 0's weights anyway);
    after that each rank draws from its own stream, so augmentations and dropout masks differ
    between ranks instead of repeating the same random choices on every shard.

    >>> [rank_seed(0, r) for r in range(3)]
    [0, 1, 2]
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"rank_seed: seed must be an int, got {type(seed).__name__}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank_seed: rank must be an int >= 0, got {rank!r}")
    return seed + rank


def seed_rank(seed: int, rank: int) -> None:
    """Seed Python, NumPy and torch with :func:`rank_seed` (call it after the model is built)."""
    runtime.seed_everything(rank_seed(seed, rank))


def reseed_after_resume(rank: int) -> None:
    """Give ranks > 0 their own stream again after every rank restored rank 0's RNG state.

    A checkpoint holds rank 0's RNG state only (rank 0 writes it). Rank 0 continues that stream
    exactly; rank ``r > 0`` draws one number from it and seeds itself with that number + ``r``, so
    resumed ranks still differ from each other, and deterministically so.
    """
    if rank <= 0:
        return
    base = int(torch.randint(0, 2**62, (1,)).item())
    runtime.seed_everything(rank_seed(base, rank))


# --------------------------------------------------------------------------- batch size and LR
def effective_batch_size(batch_size: int, accumulate: int = 1, world_size: int = 1) -> int:
    """Samples per optimizer update: ``batch_size x accumulate x world_size``.

    >>> effective_batch_size(64, 1, 8)
    512
    """
    for name, v in (("batch_size", batch_size), ("accumulate", accumulate), ("world_size", world_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"effective_batch_size: {name} must be an int >= 1, got {v!r}")
    return batch_size * accumulate * world_size


def scaling_notes(batch_size: int, accumulate: int, world_size: int, lr: float) -> list[str]:
    """Lines reporting the effective batch and the linear-scaling-rule LR for this many processes.

    The rule (Goyal et al. 2017, https://arxiv.org/abs/1706.02677): when the batch grows k times,
    multiply the LR by k (with a few epochs of warm-up). trickbag never rescales ``optim.lr`` by
    itself; it says what the rule suggests if the LR was tuned for one process.

    >>> for line in scaling_notes(32, 1, 4, 0.05): print(line)
    effective batch 128 = 32 per process x 1 accumulation step x 4 processes
    linear scaling rule (Goyal et al. 2017): optim.lr=0.05 is used as given; if it was tuned for one process (batch 32),
    the rule suggests optim.lr=0.2 (= scaled_lr(0.05, 128, base_batch_size=32)), with schedule.warmup_epochs >= 1
    """
    from trickbag.optim import scaled_lr

    eff = effective_batch_size(batch_size, accumulate, world_size)
    steps = "step" if accumulate == 1 else "steps"
    procs = "process" if world_size == 1 else "processes"
    lines = [
        f"effective batch {eff} = {batch_size} per process x {accumulate} accumulation {steps} x {world_size} {procs}"
    ]
    if world_size > 1:
        base = batch_size * accumulate
        suggested = scaled_lr(lr, eff, base_batch_size=base)
        lines.append(
            f"linear scaling rule (Goyal et al. 2017): optim.lr={lr:g} is used as given; if it was tuned for one "
            f"process (batch {base}), the rule suggests optim.lr={suggested:g} "
            f"(= scaled_lr({lr:g}, {eff}, base_batch_size={base})), with schedule.warmup_epochs >= 1"
        )
    return lines


# --------------------------------------------------------------------------- SyncBatchNorm
class _AllReduceSum(torch.autograd.Function):
    """Sum over ranks, differentiable: the gradient of a sum over ranks is the sum of the gradients."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        out = x.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        out = grad.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, group=ctx.group)
        return out, None


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose training statistics are computed over the samples of all ranks; runs on the CPU.

    torch's ``nn.SyncBatchNorm`` only runs on GPUs (and DDP refuses it in a CPU model), so
    :func:`convert_sync_batchnorm` puts this layer in CPU models. In training, the batch statistics
    are those of the global batch (Ioffe & Szegedy 2015; synchronised as in Peng et al. 2018),
    computed in two passes for accuracy: the global mean from all-reduced sums, then the global
    biased variance from all-reduced squared deviations; the running variance gets the unbiased
    ``n / (n - 1)`` factor with ``n`` the global count, as in torch. Gradients flow through the
    all-reduces. In eval mode, or in a single process, it is plain BatchNorm. It has the
    parameters, buffers and state-dict keys of ``nn.BatchNorm*d``. Shapes: ``[N, C, *]`` in and out.

    >>> bn = SyncBatchNorm(3)
    >>> x = torch.randn(4, 3, 5)
    >>> torch.allclose(bn(x), nn.functional.batch_norm(x, None, None, training=True), atol=1e-6)
    True
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group: Any = None, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected an input of at least 2 dimensions [N, C, *], got {input.dim()}D")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        synced = self.training and dist.is_available() and dist.is_initialized()
        group = (self.process_group or dist.group.WORLD) if synced else None
        if not synced or dist.get_world_size(group) == 1:
            return super().forward(input)
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        c = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        shape = [1, c] + [1] * (input.dim() - 2)
        x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
        local_n = torch.tensor([x.numel() // max(c, 1)], dtype=x.dtype, device=x.device)
        stats = _AllReduceSum.apply(torch.cat([x.sum(dims), local_n]), group)
        n = stats[c].detach()
        if n.item() <= 1:
            raise ValueError(
                f"SyncBatchNorm: expected more than 1 value per channel over all ranks in training, got {int(n)}"
            )
        mean = stats[:c] / n
        centred = x - mean.view(shape)
        var = _AllReduceSum.apply((centred * centred).sum(dims), group) / n  # biased, as used to normalise
        out = centred * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats and self.running_mean is not None and self.running_var is not None:
            with torch.no_grad():
                self.running_mean.mul_(1 - factor).add_(mean.detach().to(self.running_mean.dtype), alpha=factor)
                unbiased = var.detach() * (n / (n - 1))
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)
        return out.to(input.dtype)


def convert_sync_batchnorm(module: nn.Module, process_group: Any = None) -> nn.Module:
    """Replace every ``BatchNorm*d`` in ``module`` with a synchronised one: torch's on GPUs, trickbag's on the CPU.

    Layers on CUDA (or another device torch's ``nn.SyncBatchNorm`` supports) go through
    ``torch.nn.SyncBatchNorm.convert_sync_batchnorm``; layers on the CPU become
    :class:`SyncBatchNorm`, which shares their parameters and buffers (same state-dict keys, so
    checkpoints stay interchangeable with the plain model).

    >>> m = convert_sync_batchnorm(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)))
    >>> type(m[1]).__module__, type(m[1]).__name__
    ('trickbag.train.distributed', 'SyncBatchNorm')
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"convert_sync_batchnorm: module must be a torch.nn.Module, got {type(module).__name__}")
    out = module
    if isinstance(module, _BatchNorm) and not isinstance(module, (SyncBatchNorm, nn.SyncBatchNorm)):
        tensor = module.weight if module.weight is not None else module.running_mean
        if tensor is not None and tensor.device.type != "cpu":
            return nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group)
        out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group)
        if module.affine:
            out.weight = module.weight
            out.bias = module.bias
        out.running_mean = module.running_mean
        out.running_var = module.running_var
        out.num_batches_tracked = module.num_batches_tracked
        out.training = module.training
        if hasattr(module, "qconfig"):
            out.qconfig = module.qconfig
    for name, child in module.named_children():
        out.add_module(name, convert_sync_batchnorm(child, process_group))
    return out
