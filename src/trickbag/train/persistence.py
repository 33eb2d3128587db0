"""A training run's persistence, out of the loop: what a checkpoint holds, writing it (whole or sharded), reading
it back, picking a run up from its folder, and FSDP's lead/follow protocol at CHECKPOINT.

A :class:`Checkpointer` receives the run's :class:`~trickbag.plugin.state.State` and the few parts of the loop a
checkpoint holds (the plug-ins, the non-finite guard, the resume cursor, the running epoch's meter, the
schedule-free modes); it never sees the Trainer. The Trainer's ``state_dict``, ``load_state_dict``,
``save_checkpoint`` and ``weights_finite`` call it; plug-ins reach it through ``state.services``.

What a checkpoint holds (``format: 2``): ``model``, ``counters`` (epoch, step, position inside the epoch and its
sums, skipped updates, stop reason, world size), ``history``; a resume checkpoint also ``optimizer``,
``scheduler``, ``scaler``, ``plugins`` (each stateful plug-in's state under its key), ``rng``, ``sampler`` and
``nonfinite`` (the guard's, when on). Under FSDP a resume checkpoint is the ``.pt`` rank 0 writes with placeholders
plus the shards every rank writes beside it, and ``ranks`` (what differs between processes).
"""

from __future__ import annotations

import copy
import secrets
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from trickbag import runtime
from trickbag.errors import TrickbagError
from trickbag.nn import unwrap
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State
from trickbag.train import distributed as _dist
from trickbag.train import loader_state
from trickbag.train.averaged import ScheduleFreeModes
from trickbag.train.bookkeeping import EpochMeter, ResumeCursor, find_sampler
from trickbag.train.checkpoint_files import save_checkpoint as write_file
from trickbag.train.nonfinite import NonFiniteGuard
from trickbag.train.plugins.checkpoints import is_finite_model
from trickbag.train.plugins.run_folder import find_resume_checkpoint
from trickbag.train.sharded import (
    fill_shards,
    gather_full,
    has_placeholders,
    mesh_of,
    prune_shards,
    save_shards,
    split_sharded,
)

__all__ = ["Checkpointer"]


class Checkpointer:
    """Checkpoints of one run: its state at the current point, written or restored.

    Args:
        state: the run's state (model, optimizer, scheduler, scaler, counters, history, ...).
        plugins: the run's plug-ins, in order (the list the loop dispatches from: plug-ins added later count).
        guard: the non-finite guard, or None.
        cursor: where training picks up; a loaded checkpoint sets it.
        meter: the running epoch's meter (None between epochs): a checkpoint inside an epoch holds its sums.
        modes: the schedule-free optimizer's modes: checkpoints hold the evaluated weights.
        sharded: the model is sharded with FSDP2 (a save and a weight check are collectives).
        parts: the loop's own stateful parts by checkpoint key (``micro_batch``: the size ``auto`` found), each
            with ``state_dict()`` / ``load_state_dict()``.
    """

    def __init__(self, state: State, *, plugins: Sequence[Plugin], guard: NonFiniteGuard | None,
                 cursor: ResumeCursor, meter: Callable[[], EpochMeter | None], modes: ScheduleFreeModes,
                 sharded: bool, parts: Mapping[str, Any] | None = None) -> None:
        self.state, self.plugins, self.guard, self.cursor = state, plugins, guard, cursor
        self.meter, self.modes, self.sharded = meter, modes, sharded
        self.parts = dict(parts or {})
        self.leading = False  # rank 0 inside CHECKPOINT under FSDP: its saves call the other ranks in

    # ------------------------------------------------------------------ what a checkpoint holds
    def _mid_epoch(self) -> bool:
        return self.meter() is not None and not self.state.epoch_done  # the meter lives while an epoch runs

    def counters(self) -> dict[str, Any]:
        s = self.state
        meter, mid_epoch = self.meter(), self._mid_epoch()
        return {
            "epoch": s.epoch + (1 if s.epoch_done else 0),
            "step": s.step,
            "batch_idx": s.batch_idx + 1 if mid_epoch else 0,
            "skipped_steps": s.skipped_steps,
            "train_sums": meter.totals() if mid_epoch and meter is not None else None,
            "stopped": s.stop_reason.value if s.stop_reason is not None else None,
            "world_size": s.dist.world_size,
        }

    def weights_state(self) -> dict[str, Any]:
        """The part of a checkpoint that evaluation needs: format, weights, counters, history."""
        s = self.state
        return {"format": 2, "model": unwrap(s.model).state_dict(), "counters": self.counters(),
                "history": [dict(h) for h in s.history]}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume at this point (:meth:`Trainer.state_dict`); a schedule-free optimizer's
        state is taken at its evaluated weights (a copy: training goes on at the others)."""
        if not self.modes.active:
            return self.state_now()
        with self.modes.evaluated(recalibrate=False):
            return copy.deepcopy(self.state_now())

    def state_now(self) -> dict[str, Any]:
        """A resume checkpoint of the weights as they are (no mode switch, no copy)."""
        s = self.state
        sampler = find_sampler(s.train_loader)
        return {
            **self.weights_state(),
            "loader": loader_state.position(s.train_loader, self.cursor.epoch_start, self._mid_epoch()),
            "optimizer": s.optimizer.state_dict(),
            "scheduler": s.scheduler.state_dict() if s.scheduler is not None else None,
            "scaler": s.scaler.state_dict() if s.scaler.is_enabled() else None,
            "plugins": {p.key: sd for p in self.plugins if (sd := p.state_dict()) is not None},
            "rng": runtime.get_rng_state(),
            "sampler": sampler.state_dict() if hasattr(sampler, "state_dict") else None,
            **({"nonfinite": self.guard.state_dict()} if self.guard is not None else {}),
            **{key: part.state_dict() for key, part in self.parts.items()},
        }

    # ------------------------------------------------------------------ reading
    def load_state_dict(self, checkpoint: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (:meth:`Trainer.load_state_dict`)."""
        s = self.state
        if checkpoint.get("weights_only"):
            raise ValueError("the checkpoint holds weights only (a best.pt: no optimizer, scheduler or RNG state); "
                             "resume from last.pt or a step-N.pt, or load its 'model' into the model")
        if has_placeholders(checkpoint):  # a sharded checkpoint: its shards, for this model's processes
            checkpoint = fill_shards(checkpoint, Path(checkpoint["shards_dir"]), mesh_of(unwrap(s.model)))
        elif self.sharded:
            raise ValueError("the checkpoint holds whole weights (written without dist.strategy=fsdp) and this model "
                             "is sharded; resume it with the strategy it was written with")
        unwrap(s.model).load_state_dict(checkpoint["model"])
        ranks = checkpoint.get("ranks")  # each rank's streams: its own, on the same number of ranks
        own = ranks[s.dist.rank] if isinstance(ranks, list) and len(ranks) == s.dist.world_size else None
        if own is None and s.dist.distributed and s.dist.is_main:
            held = f"{len(ranks)} processes'" if isinstance(ranks, list) else "one process's"
            print(f"trickbag: the checkpoint holds {held} random state and this run has {s.dist.world_size} "
                  "processes: it continues with streams forked from rank 0's (not bit-identical to an "
                  "uninterrupted run)", file=sys.stderr, flush=True)
        self._load_parts(checkpoint, own)
        c = checkpoint["counters"]
        s.epoch, s.step, s.skipped_steps = int(c["epoch"]), int(c["step"]), int(c.get("skipped_steps", 0))
        s.history = [dict(h) for h in checkpoint.get("history", [])]
        if s.history:
            s.metrics = dict(s.history[-1])
        sampler = find_sampler(s.train_loader)
        if checkpoint.get("sampler") is not None and hasattr(sampler, "load_state_dict"):
            sampler.load_state_dict(checkpoint["sampler"])
        if own is not None:  # its own: nothing to fork
            self.cursor.load({**c, "train_sums": own["train_sums"]}, own["rng"], 0, own.get("loader"))
        else:
            loader = checkpoint.get("loader") if not s.dist.distributed else None  # rank 0's: not another's
            self.cursor.load(c, checkpoint.get("rng"), s.dist.rank if s.dist.distributed else 0, loader)

    def _load_parts(self, checkpoint: dict[str, Any], own: dict[str, Any] | None) -> None:
        """The plug-ins' states (with this rank's own generators), then the optimizer, scheduler, scaler, guard."""
        s = self.state
        # plug-ins first: one may change the optimizer's structure (unfreezing adds param groups)
        states = dict(checkpoint.get("plugins", {}))
        if own is not None:
            states.update({k: {**v, "this_rank": True} for k, v in own["generators"].items()})
        for p in self.plugins:
            if p.key in states:
                p.load_state_dict(states[p.key])
        s.optimizer.load_state_dict(checkpoint["optimizer"])
        if s.scheduler is not None and checkpoint.get("scheduler") is not None:
            s.scheduler.load_state_dict(checkpoint["scheduler"])
        if s.scaler.is_enabled() and checkpoint.get("scaler"):
            s.scaler.load_state_dict(checkpoint["scaler"])
        if self.guard is not None and checkpoint.get("nonfinite"):
            self.guard.load_state_dict(checkpoint["nonfinite"])
        for key, part in self.parts.items():
            if isinstance(checkpoint.get(key), dict):
                part.load_state_dict(checkpoint[key])

    def pick_up(self, run_dir: Path, *, resume: bool, report: bool) -> None:
        """At fit start in a run folder: continue from its newest readable checkpoint when ``resume``; refuse a
        folder that holds a run otherwise. ``report``: say where it resumes on stderr."""
        why = loader_state.inexact_reason(self.state.train_loader)
        if why and self.state.dist.is_main:
            print(f"trickbag: {why}", file=sys.stderr, flush=True)
        found = find_resume_checkpoint(run_dir)
        if found is None:
            return
        path, ckpt = found
        if not resume:
            raise TrickbagError(f"run folder {str(run_dir)!r} already holds a run ({path.name}); continue it "
                                "with fit(resume=True), or give another run_dir")
        if self.state.step or self.state.epoch:
            raise TrickbagError("fit(resume=True) on a Trainer that has trained already; make a new Trainer")
        self.load_state_dict(ckpt)
        if report:
            print(f"trickbag: resuming {run_dir} from {path.name} at epoch {self.state.epoch + 1}, "
                  f"update {self.state.step}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ writing
    def save(self, path: str | Path, *, resume: bool = True, **extra: Any) -> Path:
        """Write the state (``resume=False``: the weights only) plus ``extra`` atomically to ``path``
        (:meth:`Trainer.save_checkpoint`). Sharded: every rank takes part, called on every rank or led by rank 0
        at CHECKPOINT (:meth:`at_checkpoint`)."""
        path = Path(path)
        if not self.sharded:  # under DDP led by rank 0 at CHECKPOINT: every rank adds its own random state
            if self.leading:
                _dist.broadcast_object(("save", str(path), resume, None))
            return self.write(path, resume, None, extra, together=self.leading)
        folder = f"{path.name}.shards-{self.state.step:08d}-{secrets.token_hex(3)}" if resume else None
        if self.leading:
            _dist.broadcast_object(("save", str(path), resume, folder))
        elif self.state.dist.distributed:  # called on every rank: rank 0 names the folder
            folder = _dist.broadcast_object(folder)
        return self.write(path, resume, folder, extra)

    def write(self, path: Path, resume: bool, folder: str | None, extra: dict[str, Any], *,
              together: bool = False) -> Path:
        """Gather what :meth:`save` writes and write it; with a ``folder`` (a sharded model's resume
        checkpoint) the shards go there (every rank) and the rest to ``path`` (rank 0), else all to ``path``.
        ``together``: every rank of a DDP run is here (rank 0 leads): a resume checkpoint gets each rank's own
        random state, and rank 0 writes it."""
        s = self.state
        # schedule-free: the evaluated weights are stored; at an epoch's end with BatchNorm statistics for them
        with self.modes.evaluated(recalibrate=s.epoch_done):
            ckpt = self.state_now() if resume else {**self.weights_state(), "weights_only": True}
            if s.eval_weights is not None and "eval_model" not in extra:
                ckpt["eval_model"] = s.eval_weights()
            ckpt.update(extra)
            if not self.sharded:
                if together and resume:  # every rank's own streams: as many ranks resume bit for bit
                    ckpt["ranks"] = every_ranks_own(ckpt)
                return write_file(path, ckpt) if s.dist.is_main or not together else path
            if folder is None:  # the whole weights, gathered from every rank
                ckpt = gather_full(ckpt)
            else:
                if s.dist.distributed:  # every rank's own state: the same number of ranks resumes bit for bit
                    ckpt["ranks"] = every_ranks_own(ckpt)
                ckpt, shards = split_sharded(ckpt)
                save_shards(shards, path.parent / folder)
                ckpt["shards"] = folder
        if s.dist.is_main:  # written after every rank wrote its shards: a save killed midway leaves the last whole
            write_file(path, ckpt)
            prune_shards(path, keep=folder)
        return path

    # ------------------------------------------------------------------ weights check
    def weights_finite(self) -> bool:
        """Whether every floating weight and buffer is finite (under FSDP: every process's shards)."""
        if self.leading:
            _dist.broadcast_object(("finite",))
        return self.finite_everywhere()

    def finite_everywhere(self) -> bool:
        finite = is_finite_model(unwrap(self.state.model))
        return not _dist.any_rank(not finite) if self.sharded else finite

    # ------------------------------------------------------------------ CHECKPOINT under FSDP
    def at_checkpoint(self, emit: Callable[[], None], *, epoch_done: bool) -> None:
        """Run the CHECKPOINT event (``emit``) with ``state.epoch_done`` set for it; under FSDP over several
        processes with the lead/follow protocol."""
        self.state.epoch_done = epoch_done
        try:
            if self.state.dist.distributed:
                self._together(emit)
            else:
                emit()
        finally:
            self.state.epoch_done = False

    def _together(self, emit: Callable[[], None]) -> None:
        """CHECKPOINT over several processes (DDP or FSDP). The plug-ins that write files run on rank 0 only, but
        a save needs every rank (each rank's random state; under FSDP its shards) and so does a check of sharded
        weights: rank 0 runs its plug-ins and, at each such call,
        tells the others to join it (:meth:`save`, :meth:`weights_finite`); the others run theirs, then
        follow until rank 0 says it is done (one small broadcast per update when nothing is saved)."""
        if not self.state.dist.is_main:
            emit()
            none: Any = None  # rank 0's command arrives in its place
            while (command := _dist.broadcast_object(none))[0] != "end":
                if command[0] == "save":
                    self.write(Path(command[1]), command[2], command[3], {}, together=True)
                else:
                    self.finite_everywhere()
            if command[1]:
                raise TrickbagError(f"rank 0 failed while writing a checkpoint: {command[1]}")
            return
        self.leading, error = True, None
        try:
            emit()
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.leading = False
            _dist.broadcast_object(("end", error))


def every_ranks_own(ckpt: dict[str, Any]) -> list[Any]:
    """What differs between ranks, gathered on every rank (collective): the RNG state, the tricks' generators,
    the sums of the epoch so far (a rank's own samples)."""
    mine = {"rng": runtime.get_rng_state(), "train_sums": ckpt["counters"]["train_sums"],
            "loader": ckpt.get("loader"),
            "generators": {k: v for k, v in ckpt["plugins"].items() if isinstance(v, dict) and "generator" in v}}
    out: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, mine)
    return out
