"""The trainer's bookkeeping, kept out of the loop: its arguments checked, the epoch's running sums and the resume
position."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from trickbag import runtime
from trickbag.plugin.interface import Plugin
from trickbag.train import loader_state

__all__ = ["EpochMeter", "ResumeCursor", "check_added_plugin", "check_trainer_args", "find_sampler", "update_size"]


def check_trainer_args(precision: str, accumulate: Any, max_epochs: Any, clip: Any, mode: str | None,
                       plugins: Sequence[Any]) -> None:
    """The :class:`~trickbag.train.Trainer` arguments it refuses, one clear error each."""
    if precision not in ("32", "bf16", "16"):
        raise ValueError(f"precision must be '32', 'bf16' or '16', got {precision!r}")
    if isinstance(accumulate, bool) or not isinstance(accumulate, int) or accumulate < 1:
        raise ValueError(f"accumulate must be an int >= 1, got {accumulate!r}")
    if isinstance(max_epochs, bool) or not isinstance(max_epochs, int) or max_epochs < 1:
        raise ValueError(f"max_epochs must be an int >= 1, got {max_epochs!r}")
    if clip is not None and not callable(clip) and not clip > 0:
        raise ValueError(f"clip must be > 0, a function of the parameters, or None, got {clip!r}")
    if mode not in (None, "max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    for p in plugins:
        if not isinstance(p, Plugin):
            raise TypeError(f"plugins must be trickbag Plugin instances, got {type(p).__name__}")


def check_added_plugin(plugin: Any) -> None:
    """What :meth:`Trainer.add_plugin` refuses: not a plug-in, or one with build-time set-up still to run."""
    if not isinstance(plugin, Plugin):
        raise TypeError(f"plugin must be a trickbag Plugin instance, got {type(plugin).__name__}")
    if plugin.needs_setup():
        raise TypeError(f"{type(plugin).__name__} changes the model, loss or optimizer when the Trainer is built; "
                        "pass it in Trainer(plugins=[...]) (or its trick in tricks={...}) instead of add_plugin")


def find_sampler(loader: Any) -> Any:
    """The loader's sampler that knows the epoch (``set_epoch``), also behind a batch sampler."""
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None and hasattr(getattr(batch_sampler, "sampler", None), "set_epoch"):
        return batch_sampler.sampler
    return sampler


def update_size(i: int, accumulate: int, batches: int) -> tuple[int, bool]:
    """(micro-batches in the update micro-batch ``i`` belongs to, whether ``i`` is its last one).

    The last update of an epoch may be short (``batches`` not a multiple of ``accumulate``); a
    loader of unknown length (``batches == 0``) has full updates only.

    >>> [update_size(i, 4, 10) for i in (0, 3, 8, 9)]
    [(4, False), (4, True), (2, False), (2, True)]
    """
    start = i - i % accumulate
    size = min(accumulate, batches - start) if batches else accumulate
    return size, i - start == size - 1 or (bool(batches) and i == batches - 1)


class EpochMeter:
    """Running sums of one epoch on the device (no host sync per step): loss x samples, the task's
    training statistic (e.g. correct predictions), samples; the current update's share is kept
    apart and dropped when the update is vetoed.
    """

    def __init__(self, device: torch.device, start: list[float] | None = None) -> None:
        self.sums = torch.zeros(3, dtype=torch.float64, device=device)
        self.has_stat = True
        if start is not None:  # a mid-epoch resume: the sums up to the checkpoint (and whether the statistic is)
            self.sums += torch.tensor(start[:3], dtype=torch.float64, device=device)
            self.has_stat = bool(start[3]) if len(start) > 3 else True
        self.update = torch.zeros(3, dtype=torch.float64, device=device)
        # views: one in-place op per value and batch (indexing `upd[0] += v` costs three)
        self._loss, self._stat, self._n = self.update[0], self.update[1], self.update[2]
        self.seen = 0
        self._update_seen = 0  # samples of the current update (a redo takes them back)
        self.t0 = time.perf_counter()

    @torch.no_grad()
    def add(self, loss: torch.Tensor, stat: torch.Tensor | None, batch_size: int) -> None:
        """One micro-batch: its mean loss, its statistic (None: undefined, e.g. mixed targets)."""
        self._loss.add_(loss.detach(), alpha=batch_size)  # computed in float64 (the buffer's dtype)
        if stat is None:
            self.has_stat = False
        else:
            self._stat.add_(stat)
        self._n.add_(batch_size)
        self.seen += batch_size
        self._update_seen += batch_size

    def close_update(self, vetoed: bool) -> None:
        """The update ended: keep its share, or drop it when it was vetoed (non-finite)."""
        if not vetoed:
            self.sums += self.update
        self.update.zero_()
        self._update_seen = 0

    def update_loss(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The current update's loss x samples and samples so far (views on the device: no sync)."""
        return self._loss, self._n

    def drop_update(self) -> None:
        """Forget the current update's share: it is being redone (``train.micro_batch_size=auto``)."""
        self.update.zero_()
        self.seen -= self._update_seen
        self._update_seen = 0

    def totals(self) -> list[float]:
        """The sums so far and whether the statistic is defined, 1.0 or 0.0 (a mid-epoch checkpoint stores them:
        a resume at the epoch's last update adds no batch that would tell)."""
        return [*self.sums.tolist(), float(self.has_stat)]

    def finish(self, stat_name: str | None) -> dict[str, float]:
        """The epoch's ``train/*`` metrics, summed over the processes of a DDP job."""
        self.sums += self.update  # micro-batches of an unfinished update (loader of unknown length)
        self.update.zero_()
        elapsed = time.perf_counter() - self.t0
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(self.sums)
        loss, stat, n = self.sums.tolist()
        n = max(n, 1.0)
        out = {"train/loss": loss / n}
        if stat_name and self.has_stat:
            out[f"train/{stat_name}"] = stat / n
        out["train/samples_per_s"] = self.seen / elapsed if elapsed > 0 else float("nan")
        out["train/epoch_time_s"] = elapsed
        return out


class ResumeCursor:
    """Where training picks up: the micro-batch of the epoch, the sums so far and the RNG state.

    A checkpoint taken inside an epoch resumes at its next micro-batch: a resumable sampler
    (``set_start``) starts there, any other loader is replayed up to it. The global RNG is
    restored after the epoch's loader iterator is created (creating it draws from the RNG).
    """

    def __init__(self) -> None:
        self.batch_idx = 0
        self.sums: list[float] | None = None
        self.rng: dict[str, Any] | None = None
        self.rank = 0
        #: the global RNG and the loader's generators just before this epoch's iterator started
        self.epoch_start: dict[str, Any] | None = None
        self.loader: dict[str, Any] | None = None  # the checkpoint's loader position, until the epoch starts

    def load(self, counters: dict[str, Any], rng: dict[str, Any] | None, rank: int,
             loader: dict[str, Any] | None = None) -> None:
        self.batch_idx = int(counters.get("batch_idx", 0) or 0)
        self.sums = counters.get("train_sums")
        self.rng, self.rank, self.loader = rng, rank, loader
        if not self.batch_idx:  # an epoch boundary: the RNG state is that of the epoch's start
            self.restore_rng()

    def restore_rng(self) -> None:
        rng, self.rng = self.rng, None
        if rng is not None:
            runtime.set_rng_state(rng)
            if self.rank:  # the checkpoint holds rank 0's RNG state: other ranks fork their own
                from trickbag.train.distributed import reseed_after_resume

                reseed_after_resume(self.rank)

    def take_sums(self) -> list[float] | None:
        sums, self.sums = self.sums, None
        return sums

    def start_epoch(self, loader: Any, epoch: int) -> tuple[Iterator[tuple[int, Any]], int]:
        """(iterator of ``(batch_idx, batch)`` from the resume position, micro-batches in the epoch or 0)."""
        sampler = find_sampler(loader)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        start, self.batch_idx = self.batch_idx, 0
        saved, self.loader = self.loader or {}, None
        skip = start
        if start and saved.get("stateful") is not None:  # the loader continues from its own saved position
            loader.load_state_dict(saved["stateful"])
            skip = 0
        elif start:  # the loader started as it started then (the RNG of the moment comes back after iter)
            if saved.get("epoch_start") is not None:
                runtime.set_rng_state(saved["epoch_start"]["rng"])
                loader_state.set_generators(loader, saved["epoch_start"]["generators"])
            if hasattr(sampler, "set_start") and getattr(loader, "batch_size", None):  # it skips; others replay
                sampler.set_start(start * loader.batch_size)
                skip = 0
        else:  # an epoch boundary: the generators as they were (the global RNG is already)
            loader_state.set_generators(loader, saved.get("generators"))
        self.epoch_start = loader_state.snapshot(loader) if not start else saved.get("epoch_start")
        try:
            total = len(loader) + (start - skip)
        except TypeError:
            total = 0
        batches = iter(loader)
        for _ in range(skip):  # a loader without a resumable sampler: replay to the position
            next(batches, None)
        self.restore_rng()  # mid-epoch resume: after iter(loader), which draws from the global RNG
        return enumerate(batches, start=start), total
