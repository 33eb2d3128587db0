"""Micro-batches (``train.micro_batch_size``): each loader batch split into micro-batches of at most that many
samples, weighted by exact accumulation's counts, so an update's gradient is the whole batch's; ``auto`` halves the
size when the forward or backward runs out of memory and redoes the update from its start.

An update is ``accumulate`` loader batches of ``data.batch_size``; its micro-batches are those batches split (the
last piece of each may be smaller). Mixing, cutout and the other batch tricks act on the whole loader batch at
BATCH_START, before the split: the mix pairs are the unsplit run's, and SAM's second pass runs over the same
micro-batches. What does differ: BatchNorm normalises each micro-batch (batch statistics and running averages of
fewer samples), and dropout-like masks are drawn per micro-batch (the same distribution, other draws).

``auto`` (:class:`UpdateRedo`): ``torch.OutOfMemoryError`` in BATCH_START, forward or backward is caught; the rest
of the update's loader batches are only collected; at the update's end every process says whether it ran out (one
all-reduce under DDP, so an out-of-memory error on one rank cannot leave the others waiting in a gradient
all-reduce: under ``auto`` every micro-batch runs under ``no_sync`` and the gradients are averaged once the update is
known to have fitted everywhere). On a failure the update is rewound — BatchNorm buffers, the RNG streams, the
tricks' generators, the gradients, the epoch's sums — the size halved (the smallest over the processes), and the
update redone from its first loader batch. The size is checkpointed; it never grows back. FSDP2 is refused (its
forward gathers weights, a collective an out-of-memory error on one rank would leave the others waiting in).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TextIO, cast

import torch

from trickbag import runtime
from trickbag.errors import TrickbagError
from trickbag.nn import unwrap
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State
from trickbag.train.sharded import broadcast_buffers

__all__ = ["MicroBatches", "UpdateRedo", "batch_length", "check_micro_batch_size", "split_batch"]

MicroBatchSize = int | Literal["auto"] | None


def check_micro_batch_size(size: Any) -> None:
    """What the Trainer's ``micro_batch_size`` takes: an int >= 1, ``"auto"`` or None."""
    if size is None or size == "auto":
        return
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"micro_batch_size must be an int >= 1, 'auto' or None, got {size!r}")


def batch_length(batch: Any) -> int | None:
    """Samples in a batch: the targets' first dimension (``batch[1]``), else the first tensor's."""
    if isinstance(batch, (tuple, list)) and len(batch) > 1 and isinstance(batch[1], torch.Tensor) and batch[1].dim():
        return int(batch[1].shape[0])
    leaf = _first_tensor(batch)
    return int(leaf.shape[0]) if leaf is not None and leaf.dim() else None


def _first_tensor(obj: Any) -> torch.Tensor | None:
    if isinstance(obj, torch.Tensor):
        return obj
    items = obj.values() if isinstance(obj, Mapping) else obj if isinstance(obj, (tuple, list)) else ()
    for item in items:
        if (found := _first_tensor(item)) is not None:
            return found
    return None


def _slice(obj: Any, a: int, b: int, n: int) -> Any:
    """Rows ``a:b`` of every tensor whose first dimension is the batch's ``n``; anything else as it is."""
    if isinstance(obj, torch.Tensor):
        return obj[a:b] if obj.dim() and obj.shape[0] == n else obj
    if isinstance(obj, Mapping):
        return type(obj)({k: _slice(v, a, b, n) for k, v in obj.items()})  # type: ignore[call-arg]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(_slice(v, a, b, n) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_slice(v, a, b, n) for v in obj)
    return obj


def split_batch(batch: Any, size: int | None) -> list[Any]:
    """``batch`` cut into the fewest micro-batches of at most ``size`` samples, as equal as possible (the first
    ones one sample larger, as ``torch.tensor_split``: 17 by 8 gives 6, 6, 5, never a BatchNorm-breaking 1), rows of
    every tensor whose first dimension is the batch's length; one piece when ``size`` is None or not smaller.

    >>> x, y = torch.arange(10.).reshape(5, 2), torch.arange(5)
    >>> [tuple(p[1].tolist()) for p in split_batch((x, y, "meta"), 2)]
    [(0, 1), (2, 3), (4,)]
    >>> [len(p[1]) for p in split_batch((torch.zeros(17, 1), torch.zeros(17)), 8)]
    [6, 6, 5]
    """
    n = batch_length(batch)
    if size is None or n is None or n <= size:
        return [batch]
    pieces = -(-n // size)
    bounds = [a * (n // pieces) + min(a, n % pieces) for a in range(pieces + 1)]
    return [_slice(batch, a, b, n) for a, b in zip(bounds, bounds[1:], strict=False)]


class MicroBatches:
    """The current micro-batch size and what ``auto`` decided (checkpointed as ``micro_batch``).

    Args:
        size: an int (fixed), ``"auto"`` (the whole batch until an out-of-memory error halves it), or None (off:
            a loader batch is one micro-batch).
        sharded: the model is sharded with FSDP2 (``auto`` is refused).
    """

    def __init__(self, size: MicroBatchSize, *, sharded: bool = False) -> None:
        check_micro_batch_size(size)
        if size == "auto" and sharded:
            raise TrickbagError("micro_batch_size='auto' cannot be used with FSDP (its forward gathers weights, a "
                                "collective an out-of-memory error on one process would leave the others waiting "
                                "in); give a number of samples")
        self.auto = size == "auto"
        self.size: int | None = None if size == "auto" else size
        self.halvings = 0

    def split(self, batch: Any) -> list[Any]:
        return split_batch(batch, self.size)

    def state_dict(self) -> dict[str, Any]:
        return {"size": self.size, "halvings": self.halvings}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.auto:  # a fixed size is the recipe's; auto's is what the run found
            self.size = state_dict.get("size")
            self.halvings = int(state_dict.get("halvings", 0))

    def notes(self, state: State, batch_size: int | None) -> list[str]:
        """What the split changes, said once at fit start (and when auto first splits)."""
        out = []
        if self.auto and state.device.type == "cpu" and self.size is None:
            out.append("train.micro_batch_size=auto on the CPU: each loader batch is one micro-batch (torch raises "
                       "no out-of-memory error on the CPU; one the model raises itself still halves it)")
        if self.size is not None and (batch_size is None or self.size < batch_size):
            norm = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in state.model.modules())
            differs = ("BatchNorm normalises each micro-batch, not the loader batch; " if norm else "")
            out.append(f"micro-batches of at most {self.size} samples: {differs}dropout masks are drawn per "
                       "micro-batch; mix pairs and SAM's pass are the whole loader batch's, and the update's "
                       "gradient is the whole batch's (exact accumulation)")
        return out


class UpdateRedo:
    """``auto``: the update's loader batches and the state at its start, to redo it at half the micro-batch size.

    The trainer calls :meth:`keep` with each loader batch (the first of an update takes the snapshot), runs it
    through :meth:`run` (which catches the out-of-memory error), and at the update's end asks :meth:`again`
    (agreed over the processes) until the update fitted; :meth:`reduce_grads` then averages the gradients (DDP).
    """

    def __init__(self, state: State, micro: MicroBatches, plugins: Sequence[Plugin], guard: Any,
                 out: TextIO | None = sys.stderr) -> None:
        self.state, self.micro, self.guard, self.out = state, micro, guard, out
        self.failed = False
        self.pending: list[tuple[int, Any]] = []
        model = state.model
        self.buffers = [b for b in model.buffers()]
        self.saved = [b.detach().clone() for b in self.buffers]
        # the plug-ins whose state a forward or BATCH_START moves: their generators (mix, cutout, drop_path, ...)
        self.rewound = [p for p in plugins if isinstance(sd := p.state_dict(), dict) and "generator" in sd]
        self.distributed = state.dist.distributed
        self._rng: dict[str, Any] = {}
        self._gens: dict[str, Any] = {}

    def keep(self, i: int, batch: Any) -> None:
        """The update's next loader batch; the first one takes the snapshot its redo starts from."""
        if not self.pending:
            if self.distributed:  # every process starts the update from rank 0's buffers, as DDP's forward does
                broadcast_buffers(unwrap(self.state.model))
            if self.buffers:
                torch._foreach_copy_(self.saved, self.buffers)
            self._rng = runtime.get_rng_state()
            self._gens = {p.key: {**cast(dict, p.state_dict()), "this_rank": True} for p in self.rewound}
        self.pending.append((i, batch))

    def again(self, meter: Any, counts: Any) -> bool:
        """At the update's end: whether it must be redone (an out-of-memory error here or, under DDP, on any
        process). If so the state is rewound to the update's start and the size halved; otherwise the update's
        batches are let go."""
        failed = self.failed
        if self.distributed:
            flag = torch.tensor([int(failed)], device=self.state.device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            failed = bool(flag.item())
        if not failed:
            self.pending = []
            return False
        self._rewind(meter, counts)
        self._halve()
        self.failed = False
        return True

    def _rewind(self, meter: Any, counts: Any) -> None:
        s = self.state
        s.batch = s.output = s.loss = None  # the failed attempt's graph goes with them
        s.optimizer.zero_grad(set_to_none=True)
        if s.device.type == "cuda":
            torch.cuda.empty_cache()
        if self.buffers:
            torch._foreach_copy_(self.buffers, self.saved)
        runtime.set_rng_state(self._rng)
        for p in self.rewound:
            p.load_state_dict(dict(self._gens[p.key]))
        meter.drop_update()
        counts.counted = 0
        if self.guard is not None:
            self.guard.forget_losses()

    def _halve(self) -> None:
        s, micro = self.state, self.micro
        largest = max((_largest(batch, micro.size) for _, batch in self.pending), default=1)
        size = torch.tensor([largest // 2], device=s.device)
        if self.distributed:  # every process takes the smallest
            torch.distributed.all_reduce(size, op=torch.distributed.ReduceOp.MIN)
        if int(size.item()) < 1:  # every process stops here, together
            raise TrickbagError("out of memory with micro-batches of 1 sample (train.micro_batch_size=auto): "
                                "the model does not fit one sample; use a smaller model, precision=bf16 or "
                                "train.activation_checkpointing")
        micro.size, micro.halvings = int(size.item()), micro.halvings + 1
        if self.out is not None and s.dist.is_main:
            print(f"trickbag: out of memory at update {s.step + 1} with micro-batches of {largest}: the update is "
                  f"redone with micro-batches of {micro.size} (train.micro_batch_size=auto)",
                  file=self.out, flush=True)

    def reduce_grads(self) -> None:
        """DDP under ``auto``: average the gradients over the processes (the micro-batches ran under ``no_sync``
        so that an out-of-memory error could not leave a process waiting)."""
        if not self.distributed:
            return
        s = self.state
        params = [p for g in s.optimizer.param_groups for p in g["params"] if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads = [p.grad for p in params]
        flat = torch._utils._flatten_dense_tensors(grads)
        torch.distributed.all_reduce(flat)
        flat /= s.dist.world_size
        for g, reduced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads), strict=True):
            g.copy_(reduced)


def _largest(batch: Any, size: int | None) -> int:
    n = batch_length(batch) or 1
    return n if size is None else min(n, size)
