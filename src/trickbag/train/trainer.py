"""The Trainer: a training loop that reads like a hand-written one, with one event per extension point.

Ordering rules the loop keeps (each has a test in ``tests/train``):

* autocast wraps forward + loss only; backward runs outside it;
* exact accumulation (:class:`~trickbag.train.stepping.ExactAccumulation`): uneven micro-batches give the big
  batch's gradient, full micro-batches keep the plain ``loss / accumulate``;
* DDP ``no_sync()`` on all but the last micro-batch of an update;
* ``scaler.unscale_`` before AFTER_BACKWARD, so clipping and grad-norm logging see true gradients,
  once per optimizer update, not per micro-batch;
* the LR scheduler is stepped once per optimizer update (plateau: once per evaluation), and not at
  all when the update was skipped (fp16 overflow, non-finite gradients);
* ``zero_grad(set_to_none=True)`` after every update;
* evaluation under ``torch.inference_mode()`` with ``model.eval()``, and the previous mode restored.

The loss and the metrics come from a :class:`~trickbag.train.tasks.Task`; the loop names none.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import torch

from trickbag import runtime
from trickbag.errors import TrickbagError
from trickbag.nn import unwrap
from trickbag.plugin.events import REVERSED_EVENTS, Event
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import Services, State
from trickbag.train import distributed as _dist
from trickbag.train import stepping
from trickbag.train.averaged import ScheduleFreeModes
from trickbag.train.bookkeeping import EpochMeter, ResumeCursor, check_added_plugin, check_trainer_args, update_size
from trickbag.train.micro import (
    MicroBatches,
    MicroBatchSize,
    UpdateRedo,
    batch_length,
    check_micro_batch_size,
    split_batch,
)
from trickbag.train.nonfinite import NonFiniteGuard
from trickbag.train.persistence import Checkpointer
from trickbag.train.plugins.run_folder import RunFolder, open_run_folder
from trickbag.train.sharded import broadcast_buffers, eval_batches_missing, is_sharded
from trickbag.train.spike import SpikeGuard
from trickbag.train.stepping import ExactAccumulation
from trickbag.train.tasks import Classification, Task

__all__ = ["Trainer", "Precision"]

Precision = Literal["32", "bf16", "16"]
Clip = float | Callable[[list[torch.Tensor]], torch.Tensor | None] | None


class Trainer:
    """Train a model with any combination of plug-ins.

    Args:
        model: the network (moved to ``device``).
        optimizer: any ``torch.optim.Optimizer``; one that sets ``takes_closure = True`` (SAM) is
            stepped as ``optimizer.step(closure)``, the closure re-running forward + backward on the
            same micro-batches.
        train_loader: iterable of ``(x, y)`` batches.
        val_loader: optional iterable evaluated after every ``eval_every`` epochs (``val/*`` metrics).
        task: the prediction problem (:mod:`trickbag.train.tasks`): default training loss and the
            evaluation metrics; default classification with as many classes as the model has outputs.
        loss_fn: ``loss_fn(output, target) -> scalar`` to train with instead of the task's loss.
        scheduler: an LR scheduler stepped once per optimizer update, or a ``ReduceLROnPlateau``
            stepped with ``monitor`` after each evaluation; or ``scheduler(optimizer) -> scheduler``, called
            with the optimizer the trainer steps (needed when a trick rebuilds it: sam, param_groups,
            layer_decay, freeze).
        tricks: the recipe's ``tricks`` section, e.g. ``{"ema": {"decay": 0.999}, "sam": {}}`` (a trick named
            is switched on; ``trickbag tricks`` lists them and their keys): validated, checked and set up
            against this model, optimizer and loaders as a recipe run would; their plug-ins run first.
        plugins: :class:`Plugin` instances (loggers, checkpointing, your own), run after the tricks' in list
            order (reverse on ``*_END`` events); one with build-time set-up is set up here too.
        max_epochs: epochs to train.
        precision: ``"32"``; ``"bf16"`` (autocast to bfloat16, CPU or CUDA); ``"16"`` (fp16 autocast
            with a ``GradScaler``).
        accumulate: loader batches per optimizer update.
        micro_batch_size: split each loader batch into micro-batches of at most this many samples (exact
            accumulation keeps the update's gradient the whole batch's; :mod:`trickbag.train.micro` says what
            differs); ``"auto"``: the whole batch until the forward or backward runs out of memory, then halved and
            the update redone from its start (the size is checkpointed); None: off.
        clip: max global gradient norm, or a function ``clip(params) -> norm or None`` (e.g.
            :func:`trickbag.optim.clip_gradients` with ``value=``); applied once per update, after
            unscaling; ``None`` for no clipping.
        device: ``"auto"``, ``"cpu"``, ``"cuda:1"``, ... or a ``torch.device``.
        run_dir: a run folder, as ``trickbag train`` writes one: ``metrics.csv``, ``checkpoints/`` (``last.pt``,
            ``best.pt``), plots, ``summary.txt``, a lock while :meth:`fit` runs; ``fit(resume=True)`` continues
            from its newest checkpoint. A :class:`~trickbag.train.plugins.run_folder.RunFolder` sets the details (step
            checkpoints, TensorBoard, what every checkpoint stores). None: the trainer writes nothing.
        progress: ``True`` a progress bar on a terminal (epoch lines elsewhere), ``"lines"`` epoch lines,
            ``False`` nothing; None (default): a bar on a terminal, epoch lines with a ``run_dir``, else nothing.
        monitor / mode: the metric a plateau scheduler follows (default: the task's).
        eval_every: epochs between evaluations.
        nonfinite: ``"skip"`` or ``"stop"`` updates with a NaN/Inf loss, gradient or buffer
            (:class:`~trickbag.train.nonfinite.NonFiniteGuard`, ``max_nonfinite`` in a row), or a
            configured guard; None: off.
        spike: ``"skip"`` updates whose loss spikes far above the recent ones, or ``"rollback"`` (skip, and after
            repeated spikes go back to a snapshot and lower the LR for a while), or a configured
            :class:`~trickbag.train.spike.SpikeGuard`; None: off.
        seed: seed of the tricks' own random generators (mix, cutout, multiscale); default
            ``torch.initial_seed()``, what ``torch.manual_seed`` set.

    >>> import torch
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> torch.manual_seed(0) and None
    >>> x = torch.randn(64, 4); y = (x[:, 0] > 0).long()
    >>> model = torch.nn.Linear(4, 2)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.5)
    >>> t = Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=16),
    ...             DataLoader(TensorDataset(x, y), batch_size=64), max_epochs=5, device="cpu")
    >>> t.fit().metrics["val/acc"] > 0.9
    True
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, train_loader: Iterable,
                 val_loader: Iterable | None = None, *, task: Task | None = None,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                 scheduler: Any = None, tricks: Mapping[str, Any] | None = None, plugins: Sequence[Plugin] = (),
                 max_epochs: int = 1,
                 precision: Precision = "32", accumulate: int = 1, clip: Clip = None,
                 device: str | torch.device = "auto", run_dir: str | Path | RunFolder | None = None,
                 progress: bool | str | None = None,
                 monitor: str | None = None, mode: Literal["max", "min"] | None = None, eval_every: int = 1,
                 nonfinite: Literal["skip", "stop"] | NonFiniteGuard | None = None, max_nonfinite: int = 5,
                 seed: int | None = None, micro_batch_size: MicroBatchSize = None,
                 spike: Literal["skip", "rollback"] | SpikeGuard | None = None) -> None:
        check_trainer_args(precision, accumulate, max_epochs, clip, mode, plugins)
        check_micro_batch_size(micro_batch_size)
        dist = runtime.dist_info()
        self.device = device if isinstance(device, torch.device) else runtime.select_device(
            device, local_rank=dist.local_rank)
        model.to(self.device)
        task = task or Classification(num_classes=None)
        self.monitor = monitor or task.monitor[0]
        self.mode: Literal["max", "min"] = mode or cast(Literal["max", "min"], task.monitor[1])
        self.clip, self.eval_every = clip, eval_every
        self.plugins: list[Plugin] = list(plugins)
        out = sys.stderr if dist.is_main else None
        self.guard, self.spike = _guards(nonfinite, max_nonfinite, spike, out)
        self.cursor = ResumeCursor()
        self.meter: EpochMeter | None = None
        self.state = State(
            model=model, optimizer=optimizer, task=task, loss_fn=loss_fn or task.loss, train_loader=train_loader,
            val_loader=val_loader, device=self.device, precision=precision, accumulate=accumulate,
            max_epochs=max_epochs, scheduler=scheduler, run_dir=None,
            scaler=torch.amp.GradScaler(self.device.type, enabled=(precision == "16")), dist=dist,
            monitor=self.monitor, mode=self.mode,
        )
        self._sharded = is_sharded(unwrap(model))  # FSDP2: evaluation and checkpoints involve every rank
        self.micro = MicroBatches(micro_batch_size, sharded=self._sharded)
        if tricks or any(p.needs_setup() for p in self.plugins):
            from trickbag.train.setup import set_up_plugins  # imports the recipe schema: only when there are tricks

            self.plugins, self.clip = set_up_plugins(self.state, tricks, self.plugins, clip=clip, scheduler=scheduler,
                                                     seed=seed, monitor=self.monitor, mode=self.mode,
                                                     loss_given=loss_fn is not None)
        elif callable(scheduler):
            self.state.scheduler = scheduler(optimizer)
        self.folder, folder_plugins, self._show_progress = open_run_folder(
            run_dir, progress, is_main=dist.is_main, monitor=self.monitor, mode=self.mode)
        self.plugins += folder_plugins  # the run folder's plug-ins (files, progress) after the caller's
        if self.folder is not None:
            self.state.run_dir = self.folder.path
        self.modes = ScheduleFreeModes(self.state)  # schedule-free: train at one set of weights, evaluate at another
        self.checkpointer = Checkpointer(self.state, plugins=self.plugins, guard=self.guard, cursor=self.cursor,
                                         meter=lambda: self.meter, modes=self.modes, sharded=self._sharded,
                                         parts={**({"micro_batch": self.micro} if self.micro.auto else {}),
                                                **({"spike": self.spike} if self.spike is not None else {})})
        self.state.services = Services(save_checkpoint=self.checkpointer.save,
                                       weights_finite=self.checkpointer.weights_finite, eval_loop=self._eval_loop)
        if self.spike is not None:
            self.spike.bind(self.state, self.plugins)
        self.counts: ExactAccumulation  # made at fit start
        self._takes_closure = bool(getattr(self.state.optimizer, "takes_closure", False))
        self._build_dispatch()

    redo: UpdateRedo | None = None  # micro_batch_size="auto": made at fit start

    # ------------------------------------------------------------------ plumbing
    def _build_dispatch(self) -> None:
        self._dispatch: dict[Event, list[Callable[[State], None]]] = {}
        for event in Event:
            order = reversed(self.plugins) if event in REVERSED_EVENTS else self.plugins
            self._dispatch[event] = [getattr(p, "on_" + event.value) for p in order if p.handles(event)]

    def add_plugin(self, plugin: Plugin) -> None:
        """Append a plug-in (before :meth:`fit`). One with build-time set-up still to run (a trick plug-in) is
        refused: it must be passed in ``plugins=`` (or its trick in ``tricks=``) so the Trainer sets it up."""
        check_added_plugin(plugin)
        self.plugins.append(plugin)
        self._build_dispatch()

    def _emit(self, event: Event) -> None:
        for fn in self._dispatch[event]:
            fn(self.state)

    @property
    def model(self) -> torch.nn.Module:
        return self.state.model

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.state.optimizer

    def _is_plateau(self) -> bool:
        return isinstance(self.state.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)

    # ------------------------------------------------------------------ training
    def fit(self, *, resume: bool = False) -> State:
        """Train for ``max_epochs`` (or until a plug-in stops the run); returns the final :class:`State`.

        With a ``run_dir``: the folder is locked while training; ``resume=True`` continues from its newest
        readable checkpoint (from the start when it has none yet), and without it a folder that already holds
        checkpoints is refused rather than overwritten."""
        if self.folder is None:
            if resume:
                raise TrickbagError("fit(resume=True) needs the Trainer's run_dir, the folder to resume from")
            return self._fit()
        try:
            self.folder.acquire()
            self.checkpointer.pick_up(self.folder.path, resume=resume, report=self._show_progress)
            return self._fit()
        finally:
            self.folder.release()

    def _fit(self) -> State:
        s = self.state
        self.counts = ExactAccumulation(s)  # exact accumulation: the micro-batches' loss weights
        out = sys.stderr if s.dist.is_main else None
        self.redo = UpdateRedo(s, self.micro, self.plugins, self.guard, out=out) if self.micro.auto else None
        for note in self.micro.notes(s, getattr(s.train_loader, "batch_size", None)) if out is not None else ():
            print(f"trickbag: {note}", file=out, flush=True)
        self.modes.start()  # schedule-free: train at the training weights
        if self.guard is not None:
            self.guard.start(s)
        if self.spike is not None:
            self.spike.start(s)
        self._emit(Event.FIT_START)
        _dist.agree_stop(s)  # DDP: every rank stops when one rank asks to (no-op in one process)
        while s.epoch < s.max_epochs and not s.should_stop:
            if not self._train_epoch():
                break  # stopped inside the epoch; its checkpoint resumes there
            s.epoch += 1
            _dist.agree_stop(s)  # e.g. a plug-in that decided at EPOCH_END on rank 0 only
        self.modes.finish()  # schedule-free: the model leaves at the evaluated weights, BatchNorm recalibrated
        self._emit(Event.FIT_END)
        return s

    def _train_epoch(self) -> bool:
        """One epoch; False when the run was stopped inside it (no evaluation, no EPOCH_END)."""
        s = self.state
        batches, s.batches_per_epoch = self.cursor.start_epoch(s.train_loader, s.epoch)
        self.meter = meter = EpochMeter(self.device, self.cursor.take_sums())
        s.epoch_metrics = {}
        if self.spike is not None:
            self.spike.begin_epoch()
        self._emit(Event.EPOCH_START)
        s.model.train()
        s.optimizer.zero_grad(set_to_none=True)
        group: list[Any] = []  # the update's micro-batches, for a closure optimizer (SAM)
        non_blocking = bool(getattr(s.train_loader, "pin_memory", False))
        for i, batch in batches:
            batch = runtime.move_to(batch, self.device, non_blocking)
            size, last = update_size(i, s.accumulate, s.batches_per_epoch)
            if self.redo is not None:
                self.redo.keep(i, batch)  # auto: what a redo of the update starts from
            group = self._loader_batch(i, batch, size, last, group)
            if not last:
                continue
            group = self._redo_if_needed(group, size)
            meter.close_update(vetoed=self._update(group, size))
            group = []
            self._emit(Event.STEP)
            if self.spike is not None and not s.step_skipped:
                self.spike.after_step()  # after STEP: a snapshot holds this update's EMA too
            stopping = _dist.agree_stop(s)  # DDP: all ranks leave at the same update, or none does
            self._checkpoint(epoch_done=False)
            if stopping:
                return False
        s.metrics = {"epoch": float(s.epoch), "step": float(s.step), **meter.finish(s.task.train_stat_name)}
        if self.spike is not None:
            s.epoch_metrics.update(self.spike.epoch_metrics())
        self._end_epoch()
        return True

    def _loader_batch(self, i: int, batch: Any, size: int, last: bool, group: list[Any]) -> list[Any]:
        """BATCH_START on one loader batch, then forward + backward on each of its micro-batches; returns the
        update's micro-batches so far (kept for a closure optimizer). Under ``auto`` an out-of-memory error is
        caught here (and the update's later batches wait) until the update's end decides on a redo."""
        if self.redo is None:
            return self._micro_batches(i, batch, size, last, group)
        if self.redo.failed:
            return group  # this update ran out of memory already: its redo runs it at the update's end
        try:
            return self._micro_batches(i, batch, size, last, group)
        except torch.OutOfMemoryError:
            self.redo.failed = True
        return group  # outside the except: its frames (holding the activations) are gone

    def _micro_batches(self, i: int, batch: Any, size: int, last: bool, group: list[Any]) -> list[Any]:
        s, meter = self.state, cast(EpochMeter, self.meter)
        s.batch_idx, s.batch = i, batch
        self._emit(Event.BATCH_START)
        if self.guard is not None:
            self.guard.before_batch()  # buffers as they were before the update's first forward
        if self.spike is not None:
            self.spike.before_batch(first=i % s.accumulate == 0)
        pieces = self.micro.split(s.batch)
        sync = last and not (self.redo is not None and self.redo.distributed)  # auto + DDP reduces by hand
        for k, piece in enumerate(pieces):
            s.batch = piece
            with stepping.no_sync(s.model, sync and k == len(pieces) - 1):
                loss = self._forward_loss()
                s.scaler.scale(self.counts.weighted(loss, size, whole=len(pieces) == 1)).backward()
            meter.add(loss, s.task.train_stat(s.output, s.batch[1]), int(s.batch[1].shape[0]))
            if self._takes_closure:
                group.append(piece)
        return group

    def _redo_if_needed(self, group: list[Any], size: int) -> list[Any]:
        """``auto``: redo the update at half the micro-batch size while it runs out of memory on any process
        (agreed); then average the gradients under DDP. Returns the update's micro-batches."""
        redo = self.redo
        if redo is None:
            return group
        while redo.again(cast(EpochMeter, self.meter), self.counts):
            group = []
            pending = list(redo.pending)
            for k, (j, batch) in enumerate(pending):
                group = self._loader_batch(j, batch, size, k == len(pending) - 1, group)
        redo.reduce_grads()
        return group

    def _end_epoch(self) -> None:
        """Per-epoch metrics, validation, history, EPOCH_END and the epoch's checkpoint."""
        s = self.state
        s.metrics.update({k: float(v) for k, v in s.epoch_metrics.items()})  # read once: one sync each
        s.metrics.update({f"lr/group{i}": lr for i, lr in enumerate(s.lrs())})
        if s.val_loader is not None and (s.epoch + 1) % self.eval_every == 0:
            s.metrics.update({f"val/{k}": v for k, v in self.evaluate(s.val_loader).items() if isinstance(v, float)})
        if self._is_plateau() and self.monitor in s.metrics:
            s.scheduler.step(s.metrics[self.monitor])
        s.history.append(dict(s.metrics))
        self._emit(Event.EPOCH_END)
        self._checkpoint(epoch_done=True)
        s.batch = s.output = s.loss = self.meter = None

    def _checkpoint(self, *, epoch_done: bool) -> None:
        """CHECKPOINT (under FSDP with the checkpointer's lead/follow protocol: a save involves every rank)."""
        self.checkpointer.at_checkpoint(functools.partial(self._emit, Event.CHECKPOINT), epoch_done=epoch_done)

    def _forward_loss(self, *, watch: bool = True) -> torch.Tensor:
        """Forward and loss under autocast, LOSS; the one path of training, SAM's second pass and pre-flight
        (:meth:`try_batch`, which the non-finite guard does not ``watch``)."""
        s = self.state
        with stepping.autocast(self.device, s.precision):
            s.output = s.model(s.batch[0])
            s.loss = s.loss_fn(s.output, s.batch[1])
            self._emit(Event.LOSS)
        if watch and self.guard is not None:
            self.guard.watch_loss(s.loss)
        return s.loss

    def _update(self, group: list[Any], size: int) -> bool:
        """Unscale, exact-accumulation scaling, AFTER_BACKWARD, non-finite check, clip, step, schedule; True
        when the update was vetoed."""
        s = self.state
        if s.scaler.is_enabled():
            s.scaler.unscale_(s.optimizer)
        self.counts.normalise(size)  # SAM: its closure normalises the second pass the same way
        s.step_skipped, s.veto_reason = False, ""
        self._emit(Event.AFTER_BACKWARD)  # a plug-in may veto the update here (state.veto_update)
        if (self.guard is not None and self.guard.vetoes(s)) or s.step_skipped:
            return self._skip(vetoed=True)
        if self.spike is not None and self.spike.vetoes(s, *cast(EpochMeter, self.meter).update_loss()):
            return self._skip(vetoed=True)
        self._clip_gradients()
        with self.spike.stepping(s.optimizer) if self.spike is not None else contextlib.nullcontext():
            skipped = self._step(group, size)
        if skipped is not None:
            return skipped
        s.optimizer.zero_grad(set_to_none=True)
        s.step += 1
        if s.scheduler is not None and not self._is_plateau():
            s.scheduler.step()
        return False

    def _step(self, group: list[Any], size: int) -> bool | None:
        """The optimizer step (through the GradScaler, SAM's closure, both or neither); None when it was taken,
        else what :meth:`_skip` says."""
        s = self.state
        if s.scaler.is_enabled() and self._takes_closure:
            try:
                if not self._scaled_closure_step(group, size):
                    return self._skip(vetoed=False)
            except stepping.VetoedUpdate:  # the non-finite guard on the second pass (_skip closes the scaler iteration)
                return self._skip(vetoed=True)
        elif s.scaler.is_enabled():
            scale_before = s.scaler.get_scale()
            s.scaler.step(s.optimizer)
            s.scaler.update()
            if s.scaler.get_scale() < scale_before:  # inf gradients: the scaler skipped the step
                return self._skip(vetoed=False)
        elif self._takes_closure:
            try:
                s.optimizer.step(self._closure(group, size))  # type: ignore[arg-type]
            except stepping.VetoedUpdate:
                return self._skip(vetoed=True)
        else:
            s.optimizer.step()
        return None

    def _scaled_closure_step(self, group: list[Any], size: int) -> bool:
        """fp16 with a two-pass optimizer (SAM): the first pass's gradients are unscaled already; an overflow
        there skips the update before any perturbation. The closure's pass is scaled, unscaled by hand and
        inf-checked; an overflow there puts the weights back and skips the update. Either skip lowers the
        scale as the GradScaler would; a clean update steps once and lets the scale grow. True when stepped."""
        s = self.state
        if not stepping.finite_grads(s.optimizer):
            s.scaler.update()  # unscale_ recorded the inf: the scale backs off
            return False
        try:
            s.optimizer.step(self._closure(group, size))  # type: ignore[arg-type]
        except stepping.Overflow:
            s.scaler.update(new_scale=s.scaler.get_scale() * s.scaler.get_backoff_factor())
            return False
        s.scaler.update()
        return True

    def _skip(self, *, vetoed: bool) -> bool:
        """Count a skipped update (no optimizer step, no schedule step); True when it was vetoed."""
        s = self.state
        s.optimizer.zero_grad(set_to_none=True)
        if vetoed and s.scaler.is_enabled():
            s.scaler.update()  # unscale_ ran: close this iteration (halves the scale if grads were inf)
        s.step_skipped = True
        s.skipped_steps += 1
        return vetoed

    def _clip_gradients(self) -> None:
        norm = stepping.clip_gradients(self.state.optimizer, self.clip)
        if norm is not None:  # the norm before clipping (a clip function may give none)
            self.state.grad_norm = norm

    def _closure(self, group: list[Any], size: int) -> Callable[[], torch.Tensor]:
        """Forward + backward over the update's micro-batches again (SAM's second pass)."""
        s = self.state

        def closure() -> torch.Tensor:
            s.closure_pass = True
            try:
                total = torch.zeros((), device=self.device)
                for j, batch in enumerate(group):
                    s.batch = batch  # LOSS plug-ins (distillation) see this micro-batch, not the last one
                    with stepping.no_sync(s.model, j == len(group) - 1):
                        weighted = self.counts.weighted(self._forward_loss(), size, whole=len(group) == size)
                        s.scaler.scale(weighted).backward()  # fp16: scaled like the first pass
                    total = total + weighted.detach()
                stepping.unscale_second_pass(s.optimizer, s.scaler)  # fp16: by hand, checked
                self.counts.normalise(size)
                # these are the gradients the update uses: check, log and clip them too
                self._emit(Event.AFTER_BACKWARD)
                if (self.guard is not None and self.guard.vetoes(s)) or s.step_skipped:
                    raise stepping.VetoedUpdate
                self._clip_gradients()  # noqa: TB106 (unscaled by hand above: the GradScaler unscales once per update)
                return total
            finally:
                s.closure_pass = False

        return closure

    def try_batch(self, batch: Any) -> torch.Tensor:
        """One BATCH_START + forward + loss + backward on ``batch`` as training runs it; then the weights,
        buffers, gradients, plug-in states and RNG are put back, as if it had not happened.

        The run path calls it before a run directory exists, so a model that does not fit the data
        fails in one line instead of mid-epoch. Returns the model's output. With ``micro_batch_size`` it runs the
        first micro-batch (``auto``: the largest that fits, found by halving, without deciding training's size).
        """
        size = self.micro.size
        while True:
            tried = size if size is not None else (batch_length(batch) or 1)
            try:
                return self._try_batch(batch, size)
            except torch.OutOfMemoryError:
                if not self.micro.auto or tried <= 1:
                    raise
            size = tried // 2  # outside the except: the failed attempt's frames are gone

    def _try_batch(self, batch: Any, size: int | None) -> torch.Tensor:
        s = self.state
        weights = copy.deepcopy(unwrap(s.model).state_dict())
        plugins = {p.key: copy.deepcopy(sd) for p in self.plugins if (sd := p.state_dict()) is not None}
        rng, was_training = runtime.get_rng_state(), s.model.training
        try:
            s.model.train()
            s.batch = runtime.move_to(batch, self.device)
            self._emit(Event.BATCH_START)
            s.batch = split_batch(s.batch, size)[0]
            s.scaler.scale(self._forward_loss(watch=False)).backward()
            assert s.output is not None
            return s.output.detach()
        finally:
            s.optimizer.zero_grad(set_to_none=True)
            unwrap(s.model).load_state_dict(weights)
            for p in self.plugins:
                if p.key in plugins:
                    p.load_state_dict(plugins[p.key])
            runtime.set_rng_state(rng)
            s.model.train(was_training)
            s.batch = s.output = s.loss = None

    # ------------------------------------------------------------------ evaluation
    @torch.inference_mode()
    def _eval_loop(self, loader: Iterable, *, test: bool = False) -> dict[str, Any]:
        s = self.state
        # the module inside DDP: DDP's forward may broadcast buffers, a collective that would hang
        # when ranks hold a different number of evaluation batches (uneven shards)
        predict = s.predict or (s.model.module if isinstance(s.model, torch.nn.parallel.DistributedDataParallel)
                                else s.model)
        metrics = s.task.metrics(self.device, test=test, extra=[self.monitor.partition("/")[2]])
        non_blocking = bool(getattr(loader, "pin_memory", False))
        together = self._sharded and s.dist.distributed
        missing = eval_batches_missing(len(cast(Any, loader))) if together else 0
        x = None
        for batch in loader:
            x, y = runtime.move_to(batch, self.device, non_blocking)[:2]
            with stepping.autocast(self.device, s.precision):
                out = predict(x)
            metrics.update(out, y)
        for _ in range(missing):  # FSDP: as many forwards (weight gathers) as the rank with the most batches
            with stepping.autocast(self.device, s.precision):
                predict(cast(torch.Tensor, x))
        return metrics.compute()

    def evaluate(self, loader: Iterable, *, test: bool = False) -> dict[str, Any]:
        """The task's metrics (and ``loss``, ``n``) of the model on ``loader``; ``test=True`` adds the
        test-only ones (e.g. AUROC, per-class accuracy and the confusion matrix for classification).

        Runs under ``torch.inference_mode()`` with ``model.eval()`` and restores the previous mode;
        EVAL_START / EVAL_END let plug-ins swap weights (EMA) or install test-time augmentation.
        """
        s = self.state
        was_training = s.model.training
        with self.modes.evaluated(recalibrate=True):
            s.model.eval()
            try:
                # DDP and FSDP: every rank evaluates rank 0's BatchNorm statistics, the ones checkpoints hold ...
                if s.dist.distributed:
                    broadcast_buffers(unwrap(s.model))
                self._emit(Event.EVAL_START)
                if s.dist.distributed:  # ... and of the weights a plug-in swapped in (EMA)
                    broadcast_buffers(unwrap(s.model))
                s.eval_metrics = self._eval_loop(loader, test=test)
                self._emit(Event.EVAL_END)
            finally:
                s.model.train(was_training)
        return dict(s.eval_metrics)

    # ------------------------------------------------------------------ checkpoints (train/persistence.py)
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume at this point: weights, optimizer, scheduler, scaler, counters,
        plug-ins, RNG; inside an epoch (after an update) also the position and the epoch's sums. A schedule-free
        optimizer's state is taken at its evaluated weights (a copy: training goes on at the others)."""
        return self.checkpointer.state_dict()

    def load_state_dict(self, checkpoint: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output; training continues where the checkpoint was taken."""
        self.checkpointer.load_state_dict(checkpoint)

    def save_checkpoint(self, path: str | Path, *, resume: bool = True, **extra: Any) -> Path:
        """Write :meth:`state_dict` plus ``extra`` entries (e.g. the recipe) atomically to ``path``.

        ``resume=False`` writes a weights-only checkpoint (``best.pt``): the model's weights, the counters
        and the history, marked ``weights_only: True``, with ``extra``; what evaluation, predict, a
        distillation teacher and ``model.weights`` read. The optimizer, scheduler, scaler, plug-in and
        RNG states only a resume needs stay out. The weights evaluation uses when they are not the model's
        (EMA, SWA: ``state.eval_weights``) are stored as ``eval_model``.

        A model sharded with FSDP2: every rank takes part (call it on every rank, or from a plug-in at
        CHECKPOINT on rank 0, which calls the others in); a resume checkpoint is the ``.pt`` rank 0 writes plus
        the shards every rank writes beside it (:mod:`trickbag.train.sharded`), ``best.pt`` the whole weights.
        """
        return self.checkpointer.save(path, resume=resume, **extra)

    def weights_finite(self) -> bool:
        """Whether every floating weight and buffer is finite (under FSDP: every process's shards)."""
        return self.checkpointer.weights_finite()


def _guards(nonfinite: Any, max_nonfinite: int, spike: Any, out: Any) -> tuple[NonFiniteGuard | None,
                                                                               SpikeGuard | None]:
    """The non-finite and spike guards the Trainer's arguments name (a policy, a configured guard, or None)."""
    guard = (nonfinite if isinstance(nonfinite, NonFiniteGuard) or nonfinite is None
             else NonFiniteGuard(nonfinite, max_nonfinite, out=out))
    return guard, spike if isinstance(spike, SpikeGuard) or spike is None else SpikeGuard(spike, out=out)
