"""The Trainer: a training loop that reads like a hand-written one, with one event per extension point.

Ordering rules the loop keeps (each has a test in ``tests/train``):

* autocast wraps forward + loss only; backward runs outside it;
* the loss is divided by the number of micro-batches in the update (also for a short last group);
* DDP ``no_sync()`` on all but the last micro-batch of an update;
* ``scaler.unscale_`` before AFTER_BACKWARD, so clipping and grad-norm logging see true gradients,
  once per optimizer update, not per micro-batch;
* the LR scheduler is stepped once per optimizer update (plateau: once per evaluation), and not at
  all when the update was skipped (fp16 overflow, non-finite gradients);
* ``zero_grad(set_to_none=True)`` after every update;
* evaluation under ``torch.inference_mode()`` with ``model.eval()``, and the previous mode restored.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Optional, Sequence

import torch
import torch.nn.functional as F

from trickbag import runtime
from trickbag.train import distributed as _dist
from trickbag.train.checkpoint import save_checkpoint
from trickbag.train.events import REVERSED_EVENTS, Event
from trickbag.train.plugin import Plugin
from trickbag.train.state import State

__all__ = ["Trainer", "Precision"]

Precision = Literal["32", "bf16", "16"]


class _VetoedUpdate(Exception):
    """Raised inside an optimizer closure when a plug-in vetoed the update in the closure's pass.

    The optimizer's ``step(closure)`` lets it through (SAM restores the unperturbed weights first)
    and the trainer counts the update as skipped.
    """


def _move(obj: Any, device: torch.device, non_blocking: bool) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(o, device, non_blocking) for o in obj)
    if isinstance(obj, dict):
        return {k: _move(v, device, non_blocking) for k, v in obj.items()}
    return obj


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The user's module under DDP (``.module``) and ``torch.compile`` (``._orig_mod``) wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, torch.nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def _find_sampler(loader: Any) -> Any:
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None and hasattr(getattr(batch_sampler, "sampler", None), "set_epoch"):
        return batch_sampler.sampler
    return sampler


class Trainer:
    """Train a model with any combination of plug-ins.

    Args:
        model: the network (moved to ``device``).
        optimizer: any ``torch.optim.Optimizer``; one that sets ``takes_closure = True`` (SAM) is
            stepped as ``optimizer.step(closure)``, the closure re-running forward + backward on the
            same micro-batches.
        train_loader: iterable of ``(x, y)`` batches.
        val_loader: optional iterable evaluated after every ``eval_every`` epochs (``val/*`` metrics).
        loss_fn: ``loss_fn(logits, target) -> scalar``; default cross-entropy.
        scheduler: an LR scheduler stepped once per optimizer update, or a ``ReduceLROnPlateau``
            stepped with ``monitor`` after each evaluation.
        plugins: :class:`Plugin` instances, run in list order (reverse on ``*_END`` events).
        max_epochs: epochs to train.
        precision: ``"32"``; ``"bf16"`` (autocast to bfloat16, CPU or CUDA); ``"16"`` (fp16 autocast
            with a ``GradScaler``).
        accumulate: micro-batches per optimizer update.
        clip: max global gradient norm (after unscaling, once per update); ``None`` for no clipping.
        device: ``"auto"``, ``"cpu"``, ``"cuda:1"``, ... or a ``torch.device``.
        run_dir: where plug-ins that write files put them; the trainer itself writes nothing.
        monitor / mode: the metric a plateau scheduler follows.
        eval_every: epochs between evaluations.

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

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        train_loader: Iterable,
        val_loader: Optional[Iterable] = None,
        *,
        loss_fn: Optional[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = None,
        scheduler: Any = None,
        plugins: Sequence[Plugin] = (),
        max_epochs: int = 1,
        precision: Precision = "32",
        accumulate: int = 1,
        clip: Optional[float] = None,
        device: str | torch.device = "auto",
        run_dir: Optional[str | Path] = None,
        monitor: str = "val/acc",
        mode: Literal["max", "min"] = "max",
        eval_every: int = 1,
    ) -> None:
        if precision not in ("32", "bf16", "16"):
            raise ValueError(f"precision must be '32', 'bf16' or '16', got {precision!r}")
        if not isinstance(accumulate, int) or accumulate < 1:
            raise ValueError(f"accumulate must be an int >= 1, got {accumulate!r}")
        if not isinstance(max_epochs, int) or max_epochs < 1:
            raise ValueError(f"max_epochs must be an int >= 1, got {max_epochs!r}")
        if clip is not None and not clip > 0:
            raise ValueError(f"clip must be > 0 or None, got {clip!r}")
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        for p in plugins:
            if not isinstance(p, Plugin):
                raise TypeError(f"plugins must be trickbag Plugin instances, got {type(p).__name__}")
        dist = runtime.dist_info()
        self.device = device if isinstance(device, torch.device) else runtime.select_device(
            device, local_rank=dist.local_rank
        )
        if precision == "16" and self.device.type == "cpu" and not hasattr(torch.amp, "GradScaler"):
            raise ValueError("precision '16' needs torch.amp.GradScaler (torch >= 2.3); use 'bf16' on the CPU")
        model.to(self.device)
        self.clip = clip
        self.monitor = monitor
        self.mode = mode
        self.eval_every = eval_every
        self.plugins: list[Plugin] = list(plugins)
        self.eval_loss_fn: Callable = F.cross_entropy
        scaler = torch.amp.GradScaler(self.device.type, enabled=(precision == "16"))
        self.state = State(
            model=model,
            optimizer=optimizer,
            loss_fn=loss_fn or F.cross_entropy,
            train_loader=train_loader,
            val_loader=val_loader,
            device=self.device,
            precision=precision,
            accumulate=accumulate,
            max_epochs=max_epochs,
            scheduler=scheduler,
            scaler=scaler,
            run_dir=Path(run_dir) if run_dir is not None else None,
            dist=dist,
        )
        self.state.save_checkpoint = self.save_checkpoint
        self.state.eval_loop = self._eval_loop
        self._epoch_sums = torch.zeros(3, dtype=torch.float64)
        self._epoch_done = False
        self._resume_batch_idx = 0
        self._resume_sums: Optional[list[float]] = None
        self._resume_rng: Optional[dict[str, Any]] = None
        self._build_dispatch()

    # ------------------------------------------------------------------ plumbing
    def _build_dispatch(self) -> None:
        self._dispatch: dict[Event, list[Callable[[State], None]]] = {}
        for event in Event:
            order = reversed(self.plugins) if event in REVERSED_EVENTS else self.plugins
            self._dispatch[event] = [getattr(p, "on_" + event.value) for p in order if p.handles(event)]

    def add_plugin(self, plugin: Plugin, *, first: bool = False) -> None:
        """Append a plug-in (before :meth:`fit`); ``first=True`` puts it before all others instead."""
        if not isinstance(plugin, Plugin):
            raise TypeError(f"plugin must be a trickbag Plugin instance, got {type(plugin).__name__}")
        if first:
            self.plugins.insert(0, plugin)
        else:
            self.plugins.append(plugin)
        self._build_dispatch()

    def _emit(self, event: Event) -> None:
        for fn in self._dispatch[event]:
            fn(self.state)

    def _autocast(self) -> contextlib.AbstractContextManager:
        p = self.state.precision
        if p == "32":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if p == "bf16" else torch.float16
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    @property
    def model(self) -> torch.nn.Module:
        return self.state.model

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.state.optimizer

    def _is_plateau(self) -> bool:
        return isinstance(self.state.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)

    # ------------------------------------------------------------------ training
    def fit(self) -> State:
        """Train for ``max_epochs`` (or until a plug-in stops the run); returns the final :class:`State`."""
        s = self.state
        self._emit(Event.FIT_START)
        _dist.agree_stop(s)  # DDP: every rank stops when one rank asks to (no-op in one process)
        while s.epoch < s.max_epochs and not s.should_stop:
            if not self._train_epoch():
                break  # stopped mid-epoch: a checkpoint written now resumes inside this epoch
            s.epoch += 1
            _dist.agree_stop(s)  # e.g. a plug-in that decided at EPOCH_END on rank 0 only
        self._emit(Event.FIT_END)
        return s

    def _train_epoch(self) -> bool:
        """One epoch; False when a plug-in stopped the run mid-epoch (no evaluation, no EPOCH_END)."""
        s = self.state
        model, loader = s.model, s.train_loader
        sampler = _find_sampler(loader)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(s.epoch)
        start = self._resume_batch_idx
        self._resume_batch_idx = 0
        skip_manually = 0
        if start and hasattr(sampler, "set_start") and getattr(loader, "batch_size", None):
            sampler.set_start(start * loader.batch_size)
        else:
            skip_manually = start
        try:
            n_batches = len(loader) + (start - skip_manually)
        except TypeError:
            n_batches = 0
        s.batches_per_epoch = n_batches
        self._emit(Event.EPOCH_START)
        model.train()
        non_blocking = bool(getattr(loader, "pin_memory", False))
        acc_n = s.accumulate
        takes_closure = bool(getattr(s.optimizer, "takes_closure", False))
        # running sums on the device: loss x samples, correct, samples (no host sync per step)
        sums = torch.zeros(3, dtype=torch.float64, device=self.device)
        upd = torch.zeros(3, dtype=torch.float64, device=self.device)  # this update's share, dropped if vetoed
        # views of upd: one in-place op per value and batch (indexing `upd[0] += v` costs three)
        upd_loss, upd_correct, upd_n = upd[0], upd[1], upd[2]
        if self._resume_sums is not None:
            sums += torch.tensor(self._resume_sums, dtype=torch.float64, device=self.device)
            self._resume_sums = None
        self._epoch_sums = sums
        hard_targets = True
        t0 = time.perf_counter()
        seen = 0
        group: list[Any] = []
        s.optimizer.zero_grad(set_to_none=True)
        batches = iter(loader)
        for _ in range(skip_manually):  # a loader without a resumable sampler: replay to the position
            next(batches, None)
        self._restore_rng()  # mid-epoch resume: after iter(loader), which draws from the global RNG
        stopped = False
        for i, batch in enumerate(batches, start=start):
            s.batch_idx = i
            s.batch = _move(batch, self.device, non_blocking)
            self._emit(Event.BATCH_START)
            pos = i % acc_n
            group_start = i - pos
            group_size = min(acc_n, n_batches - group_start) if n_batches else acc_n
            last_micro = pos == group_size - 1 or (n_batches and i == n_batches - 1)
            x, y = s.batch[0], s.batch[1]
            sync = contextlib.nullcontext() if last_micro or not hasattr(model, "no_sync") else model.no_sync()
            with sync:
                loss = self._forward_loss(x, y)
                s.scaler.scale(loss if group_size == 1 else loss / group_size).backward()
            with torch.no_grad():
                bs = y.shape[0]
                upd_loss.add_(loss.detach(), alpha=bs)  # computed in float64 (upd's dtype)
                if y.dim() == 1:
                    upd_correct.add_((s.output.detach().argmax(1) == y).sum())
                else:
                    hard_targets = False
                upd_n.add_(bs)
            seen += int(x.shape[0])
            if takes_closure:
                group.append(s.batch)
            if not last_micro:
                continue
            closure = self._make_closure(group, group_size) if takes_closure else None
            if not self._optimizer_step(closure):  # a vetoed (non-finite) update does not count
                sums += upd
            upd.zero_()
            group = []
            self._emit(Event.STEP)
            if _dist.agree_stop(s):  # DDP: all ranks leave the loop at the same update, or none does
                stopped = True
                break
        sums += upd  # micro-batches of an unfinished update (loader of unknown length)
        if _dist.is_distributed():  # train/loss and train/acc over the samples of every rank
            torch.distributed.all_reduce(sums)
        elapsed = time.perf_counter() - t0
        totals = sums.tolist()
        n = max(totals[2], 1.0)
        s.metrics = {"epoch": float(s.epoch), "step": float(s.step), "train/loss": totals[0] / n}
        if hard_targets:  # accuracy is undefined on mixed (soft) targets
            s.metrics["train/acc"] = totals[1] / n
        s.metrics["train/samples_per_s"] = seen / elapsed if elapsed > 0 else float("nan")
        s.metrics["train/epoch_time_s"] = elapsed
        # per-epoch values collected by plug-ins (floats or 0-d tensors, read once here)
        s.metrics.update({k: float(v) for k, v in (s.extra.pop("epoch_metrics", None) or {}).items()})
        for gi, lr in enumerate(s.lrs()):
            s.metrics[f"lr/group{gi}"] = lr
        # a stop requested during the batch loop (signal, non-finite policy) leaves the epoch unfinished
        interrupted = stopped
        if not interrupted and s.val_loader is not None and (s.epoch + 1) % self.eval_every == 0:
            val = self.evaluate(s.val_loader)
            s.metrics.update({f"val/{k}": v for k, v in val.items()})
            if self._is_plateau() and self.monitor in s.metrics:
                s.scheduler.step(s.metrics[self.monitor])
        elif self._is_plateau() and self.monitor in s.metrics:
            s.scheduler.step(s.metrics[self.monitor])
        if not interrupted:
            s.history.append(dict(s.metrics))
            self._epoch_done = True  # a checkpoint written now resumes at the next epoch
            try:
                self._emit(Event.EPOCH_END)
            finally:
                self._epoch_done = False
        s.batch = s.output = s.loss = None
        return not interrupted

    def _forward_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = self.state
        with self._autocast():
            s.output = s.model(x)
            s.loss = s.loss_fn(s.output, y)
            self._emit(Event.LOSS)
        return s.loss

    def _make_closure(self, group: list[Any], group_size: int) -> Callable[[], torch.Tensor]:
        s = self.state

        def closure() -> torch.Tensor:
            s.closure_pass = True
            try:
                total = torch.zeros((), device=self.device)
                for j, batch in enumerate(group):
                    s.batch = batch  # LOSS plug-ins (distillation) see this micro-batch, not the last one
                    x, y = batch[0], batch[1]
                    last = j == len(group) - 1
                    sync = contextlib.nullcontext() if last or not hasattr(s.model, "no_sync") else s.model.no_sync()
                    with sync:
                        loss = self._forward_loss(x, y)
                        (loss / group_size).backward()
                    total = total + loss.detach() / group_size
                # these are the gradients the update uses: clip and log them too (closure_pass is True)
                self._emit(Event.AFTER_BACKWARD)
                if s.step_skipped:  # vetoed (non-finite second pass): SAM puts the weights back, no step
                    raise _VetoedUpdate
                if self.clip is not None:
                    s.grad_norm = torch.nn.utils.clip_grad_norm_(
                        [p for g in s.optimizer.param_groups for p in g["params"]], self.clip, foreach=True
                    )
                return total
            finally:
                s.closure_pass = False

        return closure

    def _optimizer_step(self, closure: Optional[Callable[[], torch.Tensor]]) -> bool:
        """Clip, step, schedule; True when a plug-in vetoed the update (``state.step_skipped`` at AFTER_BACKWARD)."""
        s = self.state
        scaler = s.scaler
        if scaler.is_enabled():
            scaler.unscale_(s.optimizer)
        s.step_skipped = False
        self._emit(Event.AFTER_BACKWARD)
        if s.step_skipped:  # a plug-in vetoed this update (e.g. non-finite gradients)
            s.optimizer.zero_grad(set_to_none=True)
            if scaler.is_enabled():
                scaler.update()  # unscale_ ran: close this iteration (halves the scale if grads were inf)
            s.skipped_steps += 1
            return True
        if self.clip is not None:
            s.grad_norm = torch.nn.utils.clip_grad_norm_(
                [p for g in s.optimizer.param_groups for p in g["params"]], self.clip, foreach=True
            )
        if scaler.is_enabled():
            scale_before = scaler.get_scale()
            if closure is not None:
                raise RuntimeError("fp16 GradScaler cannot step an optimizer that needs a closure; use bf16")
            scaler.step(s.optimizer)
            scaler.update()
            s.step_skipped = scaler.get_scale() < scale_before
        elif closure is not None:
            try:
                s.optimizer.step(closure)
            except _VetoedUpdate:
                s.optimizer.zero_grad(set_to_none=True)
                s.skipped_steps += 1
                return True
        else:
            s.optimizer.step()
        s.optimizer.zero_grad(set_to_none=True)
        if s.step_skipped:
            s.skipped_steps += 1
            return False
        s.step += 1
        if s.scheduler is not None and not self._is_plateau():
            s.scheduler.step()
        return False

    # ------------------------------------------------------------------ evaluation
    @torch.inference_mode()
    def _eval_loop(self, loader: Iterable) -> dict[str, float]:
        s = self.state
        # the module inside DDP: DDP's forward may broadcast buffers, a collective that would hang
        # when ranks hold a different number of evaluation batches (uneven shards)
        predict = s.predict or (s.model.module if isinstance(s.model, torch.nn.parallel.DistributedDataParallel)
                                else s.model)
        sums = torch.zeros(3, dtype=torch.float64, device=self.device)
        non_blocking = bool(getattr(loader, "pin_memory", False))
        for batch in loader:
            x, y = _move(batch, self.device, non_blocking)[:2]
            with self._autocast():
                out = predict(x)
            out = out.float()
            sums[0] += self.eval_loss_fn(out, y, reduction="sum").double()
            sums[1] += (out.argmax(1) == y).sum()
            sums[2] += y.shape[0]
        if s.dist.distributed and torch.distributed.is_initialized():
            torch.distributed.all_reduce(sums)
        loss, correct, n = sums.tolist()
        if n == 0:
            return {"loss": float("nan"), "acc": float("nan"), "n": 0.0}
        return {"loss": loss / n, "acc": correct / n, "n": n}

    def evaluate(self, loader: Iterable) -> dict[str, float]:
        """Loss (cross-entropy) and accuracy of the model on ``loader``.

        Runs under ``torch.inference_mode()`` with ``model.eval()`` and restores the previous mode;
        EVAL_START / EVAL_END let plug-ins swap weights (EMA) or install test-time augmentation.
        """
        s = self.state
        was_training = s.model.training
        s.model.eval()
        try:
            self._emit(Event.EVAL_START)
            metrics = self._eval_loop(loader)
            s.eval_metrics = metrics
            self._emit(Event.EVAL_END)
        finally:
            s.model.train(was_training)
        return dict(s.eval_metrics)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: weights, optimizer, scheduler, scaler, counters, plug-ins, RNG."""
        s = self.state
        plugins = {}
        for p in self.plugins:
            sd = p.state_dict()
            if sd is not None:
                plugins[p.key] = sd
        sampler = _find_sampler(s.train_loader)
        mid_epoch = getattr(self, "_mid_epoch", False)
        return {
            "format": 1,
            "model": _unwrap(s.model).state_dict(),
            "optimizer": s.optimizer.state_dict(),
            "scheduler": s.scheduler.state_dict() if s.scheduler is not None else None,
            "scaler": s.scaler.state_dict() if s.scaler.is_enabled() else None,
            "counters": {
                "epoch": s.epoch + (1 if self._epoch_done else 0),
                "step": s.step,
                "batch_idx": s.batch_idx + 1 if mid_epoch else 0,
                "skipped_steps": s.skipped_steps,
                "train_sums": self._epoch_sums.tolist() if mid_epoch else None,
            },
            "history": [dict(h) for h in s.history],
            "plugins": plugins,
            "rng": runtime.get_rng_state(),
            "sampler": sampler.state_dict() if hasattr(sampler, "state_dict") else None,
        }

    def load_state_dict(self, checkpoint: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output; training continues where the checkpoint was taken."""
        s = self.state
        _unwrap(s.model).load_state_dict(checkpoint["model"])
        # plug-ins first: one may change the optimizer's structure (unfreezing adds param groups)
        states = checkpoint.get("plugins", {})
        for p in self.plugins:
            if p.key in states:
                p.load_state_dict(states[p.key])
        s.optimizer.load_state_dict(checkpoint["optimizer"])
        if s.scheduler is not None and checkpoint.get("scheduler") is not None:
            s.scheduler.load_state_dict(checkpoint["scheduler"])
        if s.scaler.is_enabled() and checkpoint.get("scaler"):
            s.scaler.load_state_dict(checkpoint["scaler"])
        c = checkpoint["counters"]
        s.epoch, s.step, s.skipped_steps = int(c["epoch"]), int(c["step"]), int(c.get("skipped_steps", 0))
        self._resume_batch_idx = int(c.get("batch_idx", 0))
        self._resume_sums = c.get("train_sums")
        s.history = [dict(h) for h in checkpoint.get("history", [])]
        if s.history:
            s.metrics = dict(s.history[-1])
        sampler = _find_sampler(s.train_loader)
        if checkpoint.get("sampler") is not None and hasattr(sampler, "load_state_dict"):
            sampler.load_state_dict(checkpoint["sampler"])
        self._resume_rng = checkpoint.get("rng")
        if not self._resume_batch_idx:
            self._restore_rng()
        # else (mid-epoch): restored in _train_epoch right before the next batch is drawn, because
        # creating the epoch's DataLoader iterator (and replaying a plain loader) consumes the global
        # RNG after the checkpoint's state was captured in the interrupted run

    def _restore_rng(self) -> None:
        rng, self._resume_rng = self._resume_rng, None
        if rng is not None:
            runtime.set_rng_state(rng)
            if self.state.dist.distributed:  # the checkpoint holds rank 0's RNG state: other ranks fork their own
                _dist.reseed_after_resume(self.state.dist.rank)

    def save_checkpoint(self, path: str | Path, *, mid_epoch: bool = False, **extra: Any) -> Path:
        """Write :meth:`state_dict` plus ``extra`` entries (e.g. the recipe) atomically to ``path``."""
        self._mid_epoch = mid_epoch
        try:
            ckpt = self.state_dict()
        finally:
            self._mid_epoch = False
        ckpt.update(extra)
        return save_checkpoint(path, ckpt)

