"""Loss spikes (``train.spike``): an update whose loss is far above the recent ones is dropped before it is applied
(``skip``); repeated spikes also send the weights back to a snapshot and lower the learning rate for a while
(``rollback``).

**The statistic.** The update's loss (the mean over its micro-batches, and under DDP over every process: one
all-reduce, so every rank decides the same) against the last ``window`` accepted updates' losses: a spike is a loss
above both ``ratio x q`` and ``q + floor x start``, where ``q`` is the window's ``quantile`` (0.95: a high but robust
level, so a recipe whose batches are of two kinds — mixed and clean with ``tricks.mix.prob=0.5``, whose losses sit
3x apart — does not take the upper kind for spikes, as a median/MAD test does) and ``start`` is the median of the
first ``warmup`` accepted updates' losses, the task's loss scale. The floor term keeps the small, heavy-tailed
losses of a nearly fitted model (0.03, then 0.33 when a few hard samples come by in one batch) from counting.
Nothing is judged before ``warmup`` accepted updates. Spikes never enter the window.

**skip.** The update is vetoed after AFTER_BACKWARD, as a non-finite one is: no optimizer, schedule or EMA step,
and the BatchNorm buffers its forwards moved are put back.

**rollback.** As ``skip``, and when ``rollback_after`` spikes fall within ``rollback_within`` updates, the weights,
buffers, optimizer state and the tricks' weight states (EMA, SWA) go back to the last snapshot, the data goes on
from where it is (the batches since the snapshot, the spikes' among them, are not seen again), and for
``lr_updates`` updates each step uses ``lr_factor`` x the schedule's learning rate (the schedule itself and the
logged ``lr/*`` are unchanged). A snapshot is taken every ``snapshot_every`` accepted updates, on the CPU (pinned
memory on CUDA, copied without blocking) or on the device (``snapshot_on``); it costs the weights, buffers,
optimizer state and the tricks' weight states once more (under FSDP the process's shards only), and a run whose
snapshot would exceed ``max_snapshot_gb`` is refused at its start. Checkpoints carry the snapshot, so a resume
after a rollback is exact (under FSDP they do not: a resume snapshots afresh and says so).

Counted per epoch in ``metrics.csv``: ``train/spikes`` and ``train/rollbacks``.
"""

from __future__ import annotations

import collections
import copy
import math
import statistics
import sys
from typing import Any, Literal, TextIO

import torch

from trickbag.errors import TrickbagError
from trickbag.nn import unwrap
from trickbag.plugin.state import State
from trickbag.train.checkpoint_files import tensor_bytes

__all__ = ["SpikeGuard", "is_spike", "spike_level"]

_SHOWN = 5  # spikes reported on stderr one by one; later ones are only counted


def spike_level(window: list[float], *, start: float, ratio: float, quantile: float, floor: float) -> float:
    """The loss above which an update is a spike, given the accepted losses in ``window`` (the module's text).

    >>> spike_level([1.0, 1.1, 0.9, 1.05, 0.95] * 4, start=2.0, ratio=3, quantile=0.95, floor=0.5)
    3.3
    """
    level = sorted(window)[math.ceil(quantile * (len(window) - 1))]  # numpy's quantile(method="higher")
    return max(ratio * level, level + floor * start)


def is_spike(loss: float, window: list[float], *, start: float, ratio: float, quantile: float, floor: float) -> bool:
    """Whether ``loss`` is a spike against the accepted losses in ``window``.

    >>> w = [1.0, 1.1, 0.9, 1.05, 0.95] * 4
    >>> is_spike(3.0, w, start=2.0, ratio=3, quantile=0.95, floor=0.5), is_spike(30.0, w, start=2.0, ratio=3,
    ...                                                                            quantile=0.95, floor=0.5)
    (False, True)
    """
    return loss > spike_level(window, start=start, ratio=ratio, quantile=quantile, floor=floor)


class SpikeGuard:
    """Veto updates whose loss spikes; ``"skip"`` them, or ``"rollback"`` after repeated ones (module text).

    The trainer calls :meth:`bind` when it is built (a rollback's snapshot too large is refused then, before a run
    folder exists), :meth:`start` (fit start), :meth:`before_batch` (each loader batch), :meth:`vetoes` (after
    the non-finite guard, with the update's loss sums), :meth:`stepping` (around the optimizer step: the LR cut),
    :meth:`after_step` (snapshots).
    """

    def __init__(self, policy: Literal["skip", "rollback"] = "skip", *, window: int = 100, warmup: int = 20,
                 ratio: float = 3.0, quantile: float = 0.95, floor: float = 0.5, rollback_after: int = 3,
                 rollback_within: int = 20, snapshot_every: int = 50, lr_factor: float = 0.5,
                 lr_updates: int = 100, snapshot_on: Literal["cpu", "device"] = "cpu", max_snapshot_gb: float = 8.0,
                 out: TextIO | None = sys.stderr) -> None:
        if policy not in ("skip", "rollback"):
            raise ValueError(f"spike policy must be 'skip' or 'rollback', got {policy!r}")
        if not 0.5 <= quantile <= 1.0:
            raise ValueError(f"spike quantile must be between 0.5 and 1, got {quantile}")
        if not 2 <= warmup <= window:
            raise ValueError(f"spike warmup must be between 2 and the window ({window}), got {warmup}")
        self.policy, self.out = policy, out
        self.window_size, self.warmup, self.ratio, self.quantile, self.floor = window, warmup, ratio, quantile, floor
        self.rollback_after, self.rollback_within, self.snapshot_every = rollback_after, rollback_within, snapshot_every
        self.lr_factor, self.lr_updates, self.snapshot_on, self.max_snapshot_gb = (lr_factor, lr_updates, snapshot_on,
                                                                                    max_snapshot_gb)
        self.window: collections.deque[float] = collections.deque(maxlen=window)
        self.start_scale: float | None = None
        self.spikes = self.rollbacks = self.accepted = self.lr_left = 0
        self.recent: list[int] = []  # update numbers of the spikes not yet answered by a rollback
        self.snapshot: dict[str, Any] | None = None
        self.epoch_counts = [0, 0]  # spikes, rollbacks this epoch
        self._buffers: list[torch.Tensor] = []
        self._saved: list[torch.Tensor] = []
        self._sharded = False
        self._snapshot_lost = False  # a resume from a checkpoint without the snapshot (FSDP)

    # ------------------------------------------------------------------ the loop's calls
    def bind(self, state: State, plugins: list[Any]) -> None:
        """The run's state and plug-ins; refuses a rollback whose snapshot would exceed ``max_snapshot_gb``."""
        from trickbag.train.sharded import is_sharded

        self.state, self.plugins = state, plugins
        self._sharded = is_sharded(unwrap(state.model))
        if self.policy == "rollback":
            need = self._snapshot_bytes() / 2**30
            if need > self.max_snapshot_gb:
                size = f"{need:.1f} GB" if need >= 0.1 else f"{need * 2**10:.3g} MB"
                raise TrickbagError(f"train.spike=rollback needs a snapshot of about {size} (weights, buffers, "
                                    f"optimizer state, EMA/SWA) and train.spike_max_snapshot_gb is "
                                    f"{self.max_snapshot_gb:g}; raise it, or use train.spike=skip (no snapshot)")

    def start(self, state: State) -> None:
        """Fit start: the buffers a skipped update puts back; a rollback's first snapshot (unless resumed)."""
        self._buffers = list(state.model.buffers())
        self._saved = [b.detach().clone() for b in self._buffers]
        if self._sharded:
            self.snapshot_on = "device"  # a shard stays where its mesh is
            if self._snapshot_lost and self.out is not None and state.dist.is_main:
                print("trickbag: FSDP checkpoints hold no spike snapshot: a rollback after this resume returns to a "
                      "snapshot taken from here on, which the uninterrupted run may not have taken",
                      file=self.out, flush=True)
        if self.policy == "rollback" and self.snapshot is None:
            self.snapshot = self._take()

    def begin_epoch(self) -> None:
        self.epoch_counts = [0, 0]

    def before_batch(self, first: bool) -> None:
        """Copy the buffers before the update's first forward (``first``: its first loader batch); a skipped update
        puts them back."""
        if first and self._buffers:
            torch._foreach_copy_(self._saved, self._buffers)

    def vetoes(self, state: State, loss_sum: torch.Tensor, count: torch.Tensor) -> bool:
        """Judge the update about to be applied from its loss sum and sample count (this process's); a spike is
        vetoed (``state.veto_update('spike')``), its buffers put back, and maybe a rollback follows."""
        both = torch.stack([loss_sum.double(), count.double()])
        if state.dist.distributed:
            torch.distributed.all_reduce(both)  # every process judges the same number
        total, n = both.tolist()
        loss = total / max(n, 1.0)
        spike = (len(self.window) >= self.warmup and self.start_scale is not None
                 and is_spike(loss, list(self.window), start=self.start_scale, ratio=self.ratio,
                              quantile=self.quantile, floor=self.floor))
        if not spike:
            self.window.append(loss)
            if self.start_scale is None and len(self.window) >= self.warmup:
                self.start_scale = statistics.median(self.window)  # the task's loss scale, from the first updates
            return False
        state.veto_update("spike")
        if self._buffers:
            torch._foreach_copy_(self._buffers, self._saved)
        self.spikes += 1
        self.epoch_counts[0] += 1
        update = state.step + 1
        self.recent = [u for u in self.recent if u > update - self.rollback_within] + [update]
        self._report(state, loss, update)
        if self.policy == "rollback" and len(self.recent) >= self.rollback_after:
            self._roll_back(state, update)
        return True

    def stepping(self, optimizer: torch.optim.Optimizer) -> _LRCut:
        """Around the optimizer step: the learning rates cut while a rollback's cut lasts."""
        return _LRCut(optimizer, self.lr_factor if self.lr_left > 0 else 1.0)

    def after_step(self) -> None:
        """An update was applied: count down the LR cut; take a snapshot every ``snapshot_every`` updates."""
        self.accepted += 1
        if self.lr_left > 0:
            self.lr_left -= 1
        if self.policy == "rollback" and self.accepted % self.snapshot_every == 0:
            self.snapshot = self._take()

    def epoch_metrics(self) -> dict[str, float]:
        return {"train/spikes": float(self.epoch_counts[0]), "train/rollbacks": float(self.epoch_counts[1])}

    # ------------------------------------------------------------------ snapshots
    def _weights_states(self) -> dict[str, Any]:
        """The tricks' states that are weights (EMA, SWA): not generators, which keep drawing forward."""
        return {p.key: sd for p in self.plugins
                if isinstance(sd := p.state_dict(), dict) and "generator" not in sd and tensor_bytes(sd) > 0}

    def _snapshot_bytes(self) -> int:
        s = self.state
        model = tensor_bytes(unwrap(s.model).state_dict())
        params = sum(p.numel() * p.element_size() for p in s.model.parameters())
        optim = tensor_bytes(s.optimizer.state_dict()["state"]) or 2 * params  # before the first step: Adam's 2 moments
        return model + optim + tensor_bytes(self._weights_states())

    def _take(self) -> dict[str, Any]:
        s = self.state
        snap = {"model": unwrap(s.model).state_dict(), "optimizer": s.optimizer.state_dict(),
                "plugins": self._weights_states()}
        if self.snapshot_on == "device":
            return _copy(snap, None)
        return _copy(snap, torch.device("cpu"), pin=torch.cuda.is_available())

    def _roll_back(self, state: State, update: int) -> None:
        assert self.snapshot is not None
        snap = self.snapshot
        device = state.device
        unwrap(state.model).load_state_dict(_copy(snap["model"], device))
        state.optimizer.load_state_dict(_copy(snap["optimizer"], None))
        for p in self.plugins:
            if p.key in snap["plugins"]:
                p.load_state_dict(_copy(snap["plugins"][p.key], None))
        self.rollbacks += 1
        self.epoch_counts[1] += 1
        self.recent = []
        self.lr_left = self.lr_updates
        if self.out is not None and state.dist.is_main:
            print(f"trickbag: {self.rollback_after} loss spikes within {self.rollback_within} updates (last at update "
                  f"{update}): weights, optimizer and EMA back to the snapshot of {self.accepted % self.snapshot_every}"
                  f" updates ago; the learning rate x{self.lr_factor:g} for {self.lr_updates} updates",
                  file=self.out, flush=True)

    def _report(self, state: State, loss: float, update: int) -> None:
        if self.out is None or not state.dist.is_main or self.spikes > _SHOWN:
            return
        more = " (further spikes are only counted)" if self.spikes == _SHOWN else ""
        print(f"trickbag: loss spike at update {update} (epoch {state.epoch + 1}, batch {state.batch_idx + 1}): "
              f"{loss:.4g}, above the spike level {self.level():.4g} of the last {len(self.window)} updates; update "
              f"skipped (train.spike={self.policy}){more}", file=self.out, flush=True)

    def level(self) -> float | None:
        """The loss above which the next update would be a spike (None while warming up)."""
        if len(self.window) < self.warmup or self.start_scale is None:
            return None
        return spike_level(list(self.window), start=self.start_scale, ratio=self.ratio, quantile=self.quantile,
                           floor=self.floor)

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        return {"window": list(self.window), "start_scale": self.start_scale, "spikes": self.spikes,
                "rollbacks": self.rollbacks, "accepted": self.accepted, "lr_left": self.lr_left,
                "recent": list(self.recent), "epoch_counts": list(self.epoch_counts),
                "snapshot": None if self._sharded else self.snapshot}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.window = collections.deque(state_dict["window"], maxlen=self.window_size)
        self.start_scale = state_dict["start_scale"]
        self.spikes, self.rollbacks = int(state_dict["spikes"]), int(state_dict["rollbacks"])
        self.accepted, self.lr_left = int(state_dict["accepted"]), int(state_dict["lr_left"])
        self.recent = [int(u) for u in state_dict["recent"]]
        self.epoch_counts = [int(c) for c in state_dict["epoch_counts"]]
        self.snapshot = state_dict.get("snapshot")
        self._snapshot_lost = self.policy == "rollback" and self.snapshot is None


class _LRCut:
    """Multiply every group's learning rate by ``factor`` for the step inside the block; put it back after."""

    def __init__(self, optimizer: torch.optim.Optimizer, factor: float) -> None:
        self.optimizer, self.factor = optimizer, factor
        self.saved: list[Any] = []

    def __enter__(self) -> None:
        if self.factor != 1.0:
            self.saved = [g["lr"] for g in self.optimizer.param_groups]
            for g in self.optimizer.param_groups:
                g["lr"] = g["lr"] * self.factor

    def __exit__(self, *exc: object) -> None:
        for g, lr in zip(self.optimizer.param_groups, self.saved, strict=False):
            g["lr"] = lr


def _copy(obj: Any, device: torch.device | None, pin: bool = False) -> Any:
    """A deep copy with every tensor cloned (to ``device`` when given; pinned on the CPU when ``pin``)."""
    if isinstance(obj, torch.Tensor):
        if device is None:
            return obj.detach().clone()
        out = torch.empty(obj.shape, dtype=obj.dtype, device=device, pin_memory=pin and device.type == "cpu")
        return out.copy_(obj.detach(), non_blocking=pin)
    if isinstance(obj, dict):
        return type(obj)((k, _copy(v, device, pin)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_copy(v, device, pin) for v in obj)
    return copy.deepcopy(obj)
