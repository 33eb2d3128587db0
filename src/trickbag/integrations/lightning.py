"""trickbag's tricks in a Lightning run: ``Trainer(callbacks=[TricksCallback(tricks={...})])``.

The tricks on weights, gradients, optimizer, schedule and batch need no change to the LightningModule. The loss
tricks (label smoothing, mix, focal, distillation, l1) need one: ``training_step`` computes its loss with
``self.trickbag_loss(output, y)``, which the callback hands the module; a module that does not call it while a loss
trick is on is refused at its first step (never silently trained without the trick).

Decided collisions (one line each):

* ``Trainer(gradient_clip_val=...)`` with ``tricks.clip``: refused (one clipping rule).
* the module's ``configure_optimizers`` with tricks that change parameter groups (layer_decay, param_groups, freeze,
  distillation's projections): the user's optimizer class and options are kept, its groups rebuilt by the tricks; a
  scheduler from ``configure_optimizers`` is then refused (it steps the replaced optimizer).
* the module's LR scheduler with ``schedule=``: refused (one schedule).
* accumulation is Lightning's ``accumulate_grad_batches``, read, never set.

SAM runs through Lightning's optimizer closure (32 and bf16-mixed); under 16-mixed, whose precision plugin runs the
closure itself and hands the GradScaler's ``step`` no closure, the callback takes that plugin's optimizer step over
for SAM (both passes scaled, each unscaled and checked, as trickbag's Trainer does). SAM with accumulation, DeepSpeed
and manual optimization are refused in one line (see :data:`REFUSED_HERE`).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch

from trickbag import runtime
from trickbag.errors import RecipeError
from trickbag.integrations.core import TrickSession, require
from trickbag.train import loader_state

try:
    import lightning.pytorch as pl
except ImportError:  # pragma: no cover - the older package name
    import pytorch_lightning as pl  # type: ignore[no-redef]
require("lightning", pl.__version__)

__all__ = ["TricksCallback", "REFUSED_HERE", "RAW_KEY"]

#: where a checkpoint written with EMA/SWA keeps the raw weights (its ``state_dict`` holds the averaged ones)
RAW_KEY = "trickbag_raw_state_dict"

#: what this adapter refuses besides :data:`trickbag.integrations.core.REFUSED`, and why
REFUSED_HERE: dict[str, str] = {
    "sam": "with accumulate_grad_batches > 1 Lightning's closure re-runs only the last micro-batch, so SAM's second "
           "pass would not see the update's batch; use accumulate_grad_batches=1 (or trickbag's Trainer, which "
           "re-runs every micro-batch)",
    "sam+scaler": "this precision plugin has a GradScaler but no _after_closure hook (a Lightning older than 2.5?), "
                  "so SAM's passes cannot be scaled and checked; use bf16-mixed or 32",
    "deepspeed": "DeepSpeed owns the optimizer step, gradient clipping and accumulation; use strategy='ddp' or 'fsdp'",
    "manual_optimization": "the tricks hook Lightning's automatic optimization; a module with "
                           "automatic_optimization=False steps its own optimizer",
    "gradient_clip_val": "Trainer(gradient_clip_val=...) and tricks.clip would both clip; keep one of them",
    "averaging": "Lightning's own weight averaging callback (WeightAveraging, EMAWeightAveraging or "
                 "StochasticWeightAveraging) and tricks.ema/swa would both average the weights and swap them in for "
                 "validation; keep one of them",
    "scheduler+schedule": "the module's LR scheduler and schedule= would both set the learning rate; keep one",
    "scheduler+groups": "the tricks rebuilt the optimizer's parameter groups, so the module's LR scheduler would "
                        "step the replaced optimizer; pass schedule= (a recipe's schedule section) instead",
    "ema.select": "choosing between the average and the raw weights (select: best or raw) needs an evaluation of the "
                  "raw weights beside the average's, which Lightning's validation loop does not run; leave select: "
                  "ema (validation runs on the average, which fit leaves in the module)",
    "ignored_loss": "a loss trick is on but training_step did not call self.trickbag_loss(output, y); the run would "
                    "train without it",
}


def _refuse(key: str) -> RecipeError:
    return RecipeError(f"trickbag.integrations.lightning: {key}: {REFUSED_HERE[key]}")


class TricksCallback(pl.Callback):
    """Run recipe tricks in ``lightning.pytorch.Trainer.fit``.

    Args:
        tricks: a recipe's ``tricks:`` section (validated now: a typo is one error naming the key).
        schedule: a recipe's ``schedule:`` section, stepped once per optimizer update.
        nonfinite: the non-finite guard, ``"skip"`` or ``"stop"``; None: off.
        audit: watch the run with trickbag's runtime audit (:func:`trickbag.audit.audit`) and print its report
            when ``fit`` ends; the report is :attr:`audit_report`.
        loss_fn: the base training loss ``loss_fn(output, target)`` (default: cross-entropy, the classification
            task's), what ``self.trickbag_loss`` computes before the loss tricks change it.
        seed: the seed of the tricks' own generators (default: ``torch.initial_seed()``).
        num_classes: the model's outputs (classes); None: the module's ``forward`` on a zero sample tells.

    >>> cb = TricksCallback(tricks={"ema": {"decay": 0.9}})
    >>> TricksCallback(tricks={"ema": {"decai": 0.9}})  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    trickbag.errors.RecipeError: tricks.ema.decai: ...
    """

    def __init__(self, tricks: dict[str, Any] | None = None, *, schedule: dict[str, Any] | None = None,
                 nonfinite: str | None = None, max_nonfinite: int = 5, audit: bool = False, loss_fn: Any = None,
                 seed: int | None = None, num_classes: int | None = None) -> None:
        self.session = TrickSession(tricks, schedule=schedule, nonfinite=nonfinite, max_nonfinite=max_nonfinite,
                                    framework="Lightning")
        ema = self.session.section.ema
        if ema.enabled and ema.select != "ema":
            raise _refuse("ema.select")
        self.audit = audit
        self.audit_report: Any = None
        self._audit: Any = None
        self.loss_fn, self.seed, self.num_classes = loss_fn, seed, num_classes
        self._ready = False
        self._scale: float | None = None  # the GradScaler's scale before the update being taken (fp16)
        self._plugin: Any = None  # the precision plugin whose optimizer step SAM took over (fp16)
        self._ended_epoch: int | None = None  # an epoch the tricks ended on resume, whose end Lightning runs again
        self._warned_inside = False  # a checkpoint inside an accumulated update was said once
        self._loaded: dict[str, Any] | None = None
        self._loss_called = False
        self._checked_loss = False
        self._trainer_loader: Any = None
        self._batch: Any = None
        # the training loader's position, kept in Lightning's checkpoint (see _restart_loader)
        self._seen = 0  # micro-batches of the current epoch the loader has handed out
        self._epoch_start: dict[str, Any] | None = None  # RNG and loader generators just before its iterator
        self._setup_rng: dict[str, Any] | None = None  # the RNG when fit began (before Lightning's first iterator)
        self._first_epoch = True  # the next epoch start is this fit's first
        self._metrics: Any = dict

    @property
    def state_key(self) -> str:
        return "trickbag.TricksCallback"

    # ------------------------------------------------------------------ set-up
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit":
            return
        if "deepspeed" in type(trainer.strategy).__name__.lower():
            raise _refuse("deepspeed")
        if not pl_module.automatic_optimization:
            raise _refuse("manual_optimization")
        if trainer.gradient_clip_val and (self.session.enabled("clip")):
            raise _refuse("gradient_clip_val")
        if (self.session.enabled("ema") or self.session.enabled("swa")) and any(
                type(c).__name__ in _AVERAGING or isinstance(c, _lightning_averaging()) for c in trainer.callbacks):
            raise _refuse("averaging")
        if self.session.enabled("sam") and trainer.accumulate_grad_batches > 1:
            raise _refuse("sam")
        plugin = getattr(trainer, "precision_plugin", None)
        if self.session.enabled("sam") and getattr(plugin, "scaler", None) is not None \
                and not hasattr(plugin, "_after_closure"):
            raise _refuse("sam+scaler")
        self._setup_rng = runtime.get_rng_state()  # (a resumed run loads its checkpoint after this hook)
        self._first_epoch = True

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        s = self.session
        user_opt = trainer.optimizers[0]
        has_sched = bool(trainer.lr_scheduler_configs)
        if has_sched and s.schedule is not None:
            raise _refuse("scheduler+schedule")
        from trickbag.runtime import DistInfo

        dist = DistInfo(rank=trainer.global_rank, world_size=trainer.world_size,
                        local_rank=trainer.local_rank) if trainer.world_size > 1 else DistInfo()
        from trickbag.train.tasks import Classification

        total, epochs = _horizon(trainer, s.schedule is not None)
        s.set_up(pl_module, user_opt, trainer.train_dataloader, epochs=epochs,
                 accumulate=trainer.accumulate_grad_batches, loss_fn=self.loss_fn, seed=self.seed,
                 task=Classification(num_classes=self.num_classes),
                 clip=None, dist=dist, device=pl_module.device, total_updates=total)
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        if scaler is not None and scaler.is_enabled():  # fp16: inf gradients are the GradScaler's business, and an
            s.state.scaler = scaler  # update it skips is no update (no step, schedule or EMA), as in trickbag's Trainer
        if s.optimizer is not user_opt:
            if has_sched:
                raise _refuse("scheduler+groups")
            trainer.strategy.optimizers = [s.optimizer]
        if getattr(s.optimizer, "takes_closure", False):
            if s.state.scaler.is_enabled():  # fp16: the precision plugin's step is SAM's, both passes scaled
                self._plugin = trainer.precision_plugin
                self._plugin.optimizer_step = _scaled_two_pass(self._plugin, s.state)
            else:
                _first_pass_first(s.optimizer, s.state)
        pl_module.trickbag_loss = self._loss
        pl_module.training_step = self._wrap_step(pl_module.training_step)
        self._ready = True
        self._trainer_loader = trainer.train_dataloader
        self._metrics = lambda: _scalars(trainer.callback_metrics)
        loaded, self._loaded = self._loaded, None
        inside = ended = False
        if loaded is not None:
            s.load_state_dict(loaded, rng=False)
            inside, ended = _where(loaded, trainer)
            if not inside:  # between epochs: the RNG and the loader's generators of that moment
                runtime.set_rng_state(loaded["rng"])
                loader_state.set_generators(trainer.train_dataloader, (loaded.get("loader") or {}).get("generators"))
        if self.audit:
            from trickbag.audit import audit

            self._audit = audit(pl_module, s.optimizer, report=True)
            self.audit_report = self._audit.__enter__()
        s.fit_start()
        if inside and loaded is not None:
            self._restart_loader(trainer, loaded)
        elif loaded is not None:
            loop = trainer.fit_loop
            saved_epoch = (loaded.get("counters") or {}).get("epoch")
            # written after the epoch's last batch, before its end: the tricks end that epoch now, with the metrics
            # of the checkpoint's moment. Lightning either moved on to the next epoch (a step checkpoint on the last
            # batch), which it restarts without its start hook, or (at validation's end) finishes the checkpoint's
            # epoch (its end hook: not the tricks' again) and starts the next one itself, with its hook
            moved_on = not ended or saved_epoch is None or trainer.current_epoch > saved_epoch
            if ended:
                s.epoch_end(loaded.get("metrics"))
                self._ended_epoch = None if moved_on else trainer.current_epoch
            if (loop.restarted_mid_epoch or loop.restarted_on_epoch_end) and moved_on:
                self._begin_epoch(trainer)

    def _wrap_step(self, step: Any) -> Any:
        @functools.wraps(step)
        def training_step(*given: Any, **kwargs: Any) -> Any:  # Lightning passes them by position or (DDP) name
            args = list(given)
            batch = args[0] if args else kwargs["batch"]
            batch_idx = args[1] if len(args) > 1 else kwargs["batch_idx"]
            if self.session.state.closure_pass:  # SAM's second pass: the batch the first pass trained on
                batch = self._batch
            else:
                batch = self._batch = self.session.batch_start(batch, batch_idx)
                self._seen = batch_idx + 1
            if args:
                args[0] = batch
            else:
                kwargs["batch"] = batch
            self._loss_called = False
            out = step(*args, **kwargs)
            if self.session.loss_tricks and not self._checked_loss:
                if not self._loss_called:
                    raise _refuse("ignored_loss")
                self._checked_loss = True
            return out
        return training_step

    def _loss(self, output: torch.Tensor, target: Any = None) -> torch.Tensor:
        """``self.trickbag_loss(output, y)``: the training loss with the loss tricks, weighted for exact
        accumulation (Lightning divides it by ``accumulate_grad_batches`` afterwards, as always)."""
        self._loss_called = True
        s = self.session.state
        if not s.model.training:  # validation / test: the task's own loss of the given targets, no trick, no guard
            if target is None:
                raise RecipeError("self.trickbag_loss(output) outside training needs the targets: call "
                                  "self.trickbag_loss(output, y)")
            return self.session.eval_loss(output, target)
        if target is not None and self.session.enabled("mix"):
            target = None  # mix made the targets: the batch's labels are the soft ones the module was handed
        return self.session.loss(output, target if target is not None else s.batch[1])

    # ------------------------------------------------------------------ the loop
    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._begin_epoch(trainer)

    def _begin_epoch(self, trainer: Any) -> None:
        """EPOCH_START, and what the epoch's loader iterator starts from (for a resume inside the epoch)."""
        n = trainer.num_training_batches
        self.session.epoch_start(trainer.current_epoch, int(n) if n != float("inf") else 0)
        self._seen = 0
        first, self._first_epoch = self._first_epoch, False
        loop = trainer.fit_loop
        if trainer.current_epoch > 0 and not loop.is_resuming and not loop.epoch_loop.restarting:
            self._epoch_start = loader_state.snapshot(trainer.train_dataloader)  # Lightning starts it next
        elif first and self._setup_rng is not None and not loop.is_resuming:
            # a fresh fit's first epoch: Lightning made its iterator before this hook; what it started from
            self._epoch_start = {"rng": self._setup_rng, "generators": None, "lightning_iterator": True}
        else:
            # the first epoch after a resume between epochs: Lightning keeps the iterator it made before the
            # checkpoint's state was loaded; a new one from the restored RNG and generators replaces it
            self._epoch_start = loader_state.snapshot(trainer.train_dataloader)
            _set_epoch(trainer.train_dataloader, trainer.current_epoch)
            iter(_fetcher(trainer))

    def _restart_loader(self, trainer: Any, loaded: dict[str, Any]) -> None:
        """A resume inside an epoch (Lightning then skips the epoch's start and keeps the iterator it made before
        the checkpoint was loaded, at the epoch's first batch): the epoch starts again for the tricks, the loader's
        iterator is made again from the RNG and generators it started from, replayed to the checkpoint's position,
        and the RNG of the checkpoint's moment comes back."""
        n = trainer.num_training_batches
        self.session.epoch_start(trainer.current_epoch, int(n) if n != float("inf") else 0)
        self._first_epoch = False
        pos = loaded["loader"]
        seen = int(pos["seen"])
        start = self._epoch_start = pos["epoch_start"]
        loader = trainer.train_dataloader
        fetcher = _fetcher(trainer)
        if loader_state.is_stateful(loader):
            pass  # Lightning restored the loader's own position (its state is in Lightning's checkpoint)
        else:
            if not start.get("lightning_iterator"):  # (else: load_state_dict put the RNG back before Lightning made it)
                runtime.set_rng_state(start["rng"])
                loader_state.set_generators(loader, start["generators"])
                _set_epoch(loader, trainer.current_epoch)
                iter(fetcher)
            for _ in range(seen):
                next(fetcher.iterator)
        self._seen = seen
        runtime.set_rng_state(loaded["rng"])

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        if self._ready:
            scaler = self.session.state.scaler
            self._scale = scaler.get_scale() if scaler.is_enabled() else None  # (the GradScaler updates after this)
            self.session.before_update()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if not (self._ready and self.session.update_size()[1]):
            return
        s = self.session.state
        if self._scale is not None and s.scaler.get_scale() < self._scale and not s.step_skipped:
            s.step_skipped = True  # the GradScaler found inf gradients and skipped the optimizer step
            s.skipped_steps += 1
        self._scale = None
        self.session.after_update()
        if s.should_stop:  # nonfinite="stop" (or max_nonfinite reached): end the run after this update
            trainer.should_stop = True

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if self._ready and trainer.training is False and trainer.state.fn == "fit":
            self.session.eval_start()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self._ready and trainer.state.fn == "fit":
            self.session.eval_end(_scalars(trainer.callback_metrics))

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self._ended_epoch is not None and self._ended_epoch == trainer.current_epoch:
            self._ended_epoch = None  # ended for the tricks when the run resumed (see on_train_start)
            self._seen = 0
            return
        if self._ready:
            for key, value in self.session.state.epoch_metrics.items():  # e.g. grad_norm's train/grad_norm(_max)
                pl_module.log(key, float(value), on_step=False, on_epoch=True, batch_size=1, sync_dist=False)
            self.session.epoch_end(_scalars(trainer.callback_metrics))
            self._seen = 0

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        if not self._ready:
            return
        self.session.fit_end()
        if self._audit is not None:
            self._audit.__exit__(None, None, None)
            self._audit = None

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        for name in ("training_step", "trickbag_loss"):
            pl_module.__dict__.pop(name, None)
        if self._plugin is not None:
            self._plugin.__dict__.pop("optimizer_step", None)
            self._plugin = None
        self._ready = False

    # ------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        """EMA/SWA: the checkpoint's ``state_dict`` is the averaged weights (what validation scored, what
        ``ModelCheckpoint(monitor=...)`` ranks, what ``load_from_checkpoint`` and ``validate(ckpt_path=...)`` then
        get, as with Lightning's own ``WeightAveraging``); the raw weights training goes on from are kept beside
        them and come back when ``fit`` resumes from it (:meth:`on_load_checkpoint`)."""
        provider = self.session.state.eval_weights if self._ready else None
        held = checkpoint.get("state_dict")
        if provider is None or not isinstance(held, dict):
            return
        averaged = provider()
        if set(averaged) != set(held):  # (a sharded strategy's state_dict: left as it is)
            return
        checkpoint[RAW_KEY] = held
        checkpoint["state_dict"] = {k: v.detach().clone() for k, v in averaged.items()}

    def on_load_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        if RAW_KEY in checkpoint and trainer.state.fn == "fit":  # resuming: training goes on from the raw weights
            pl_module.load_state_dict(checkpoint[RAW_KEY])

    def state_dict(self) -> dict[str, Any]:
        if not self._ready:
            return {}
        loader = self._trainer_loader
        inside = self._seen > 0
        self._warn_inside_update()
        sd = {**self.session.state_dict(),
              "loader": {**loader_state.position(loader, self._epoch_start, inside), "seen": self._seen},
              "metrics": self._metrics()}  # what the epoch's end sees, for a checkpoint written just before it
        if self.session.state.dist.distributed and torch.distributed.is_initialized():
            # Lightning writes rank 0's callback state; what differs between the processes goes in from every rank
            # (collective: Lightning builds a checkpoint's state on every rank)
            sd["ranks"] = _every_ranks_own(sd)
        return sd

    def _warn_inside_update(self) -> None:
        """A checkpoint written between two micro-batches of one accumulated update (validation every N batches under
        accumulate_grad_batches): Lightning keeps no gradients in it, so a resume from it loses the update's partial
        gradients; said once, in one line (rank 0)."""
        s = self.session.state
        seen, acc, n = self._seen, s.accumulate, s.batches_per_epoch
        if acc > 1 and seen and seen % acc and seen != n and not self._warned_inside and s.dist.is_main:
            self._warned_inside = True
            print(f"trickbag: checkpoint written inside an accumulated update (after micro-batch {seen % acc} of "
                  f"{acc}): its partial gradients are not in it, so a resume from it is not the straight run; "
                  "checkpoint at update boundaries (every_n_train_steps, or validation every a multiple of "
                  "accumulate_grad_batches batches)", file=sys.stderr, flush=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not state_dict:
            self._loaded = None
            return
        if not isinstance(state_dict.get("loader"), dict):  # written before the loader's position was kept
            state_dict = {**state_dict, "loader": None}
        dist = torch.distributed
        rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_available() and dist.is_initialized() \
            else (0, 1)
        self._loaded = _own(state_dict, rank, world)  # the rest is applied once the tricks are set up
        start = (self._loaded.get("loader") or {}).get("epoch_start")
        if start is not None and start.get("lightning_iterator"):
            # a resume inside the run's first epoch, whose iterator Lightning makes before any hook sees the loader
            # (after this one): the RNG goes back to where it was when that iterator was made in the first place
            runtime.set_rng_state(start["rng"])


_AVERAGING = ("WeightAveraging", "EMAWeightAveraging", "StochasticWeightAveraging")


def _lightning_averaging() -> tuple[type, ...]:
    """Lightning's weight-averaging callback classes this version has."""
    import lightning.pytorch.callbacks as callbacks

    return tuple(getattr(callbacks, n) for n in _AVERAGING if hasattr(callbacks, n))


def _horizon(trainer: Any, needed: bool) -> tuple[int | None, int]:
    """(the run's optimizer updates as Lightning counts them (``max_steps``, ``limit_train_batches``, accumulation),
    the epochs the tricks plan over): the ``schedule=`` horizon; None when Lightning cannot tell (an endless run:
    refused when ``schedule=`` needs it)."""
    import math

    total = trainer.estimated_stepping_batches
    known = total is not None and math.isfinite(total) and total > 0
    if not known and needed:
        raise RecipeError("schedule= needs the run's length and this Trainer runs without end (max_epochs=-1 and no "
                          "max_steps): set max_epochs or max_steps")
    epochs = trainer.max_epochs
    if not epochs or epochs < 0:  # max_steps alone: the epochs it spans
        per_epoch = max(1, int(trainer.num_training_batches) // max(1, trainer.accumulate_grad_batches)) \
            if math.isfinite(trainer.num_training_batches) else 1
        epochs = max(1, math.ceil(total / per_epoch)) if known else 1
    return (int(total) if known else None), int(epochs)


def _scalars(metrics: Any) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if v.numel() == 1}


def _every_ranks_own(sd: dict[str, Any]) -> list[Any]:
    """Each rank's RNG, loader position and tricks' generators, gathered on every rank."""
    mine = {"rng": sd["rng"], "loader": sd["loader"],
            "generators": {k: v for k, v in sd["plugins"].items() if isinstance(v, dict) and "generator" in v}}
    out: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, mine)
    return out


def _own(loaded: dict[str, Any], rank: int, world_size: int) -> dict[str, Any]:
    """The checkpoint's state as this rank resumes it: its own RNG, loader position and tricks' generators when the
    checkpoint holds every rank's (written by as many processes), else rank 0's (the tricks' generators fork)."""
    ranks = loaded.get("ranks")
    if not isinstance(ranks, list) or len(ranks) != world_size:
        if world_size > 1 and rank == 0:
            held = f"{len(ranks)} processes'" if isinstance(ranks, list) else "one process's"
            print(f"trickbag: the checkpoint holds {held} random state and this run has {world_size} processes: "
                  "it continues with streams forked from rank 0's (not bit-identical to an uninterrupted run)",
                  file=sys.stderr, flush=True)
        return loaded
    own = ranks[rank]
    plugins = {**loaded["plugins"], **{k: {**v, "this_rank": True} for k, v in own["generators"].items()}}
    return {**loaded, "rng": own["rng"], "loader": own["loader"], "plugins": plugins}


def _fetcher(trainer: Any) -> Any:
    """Lightning's training data fetcher (its iterator over the training loader)."""
    fetcher = getattr(trainer.fit_loop, "_data_fetcher", None)
    if fetcher is None:  # pragma: no cover - a Lightning version that moved it
        raise RecipeError("trickbag.integrations.lightning: this Lightning version has no fit_loop._data_fetcher; "
                          "the exact resume needs it (tested: lightning 2.6)")
    return fetcher


def _set_epoch(loader: Any, epoch: int) -> None:
    for owner in (getattr(loader, "sampler", None), getattr(getattr(loader, "batch_sampler", None), "sampler", None)):
        set_epoch = getattr(owner, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)


def _where(loaded: dict[str, Any], trainer: Any) -> tuple[bool, bool]:
    """Where the checkpoint was written: (inside an epoch, after the epoch's last batch but before its end)."""
    pos = loaded.get("loader") or {}
    seen = int(pos.get("seen", 0) or 0)
    n = trainer.num_training_batches
    ended = bool(seen) and n != float("inf") and seen >= n
    return bool(seen) and not ended and pos.get("epoch_start") is not None, ended


def _first_pass_first(optimizer: Any, state: Any) -> None:
    """A two-pass optimizer (SAM) under Lightning: Lightning hands ``step`` a closure that runs forward + backward
    (and ``on_before_optimizer_step``: the guard, clipping) without having run it; run it once for the first pass,
    then the optimizer's own step with the same closure for the second pass at the perturbed weights, as trickbag's
    Trainer does; a first pass the guard vetoed ends the update (no second pass, one skip)."""
    own_step = type(optimizer).step

    def step(closure: Any = None) -> Any:
        first = closure()
        if state.step_skipped:  # the first pass was vetoed (the guard): the update ends there, no second pass
            return first
        state.closure_pass = True
        try:
            return own_step(optimizer, closure)
        finally:
            state.closure_pass = False

    optimizer.step = step


def _scaled_two_pass(plugin: Any, state: Any) -> Any:
    """SAM under a precision plugin with a GradScaler (16-mixed): the plugin's own ``optimizer_step`` runs Lightning's
    closure once, unscales and steps through ``GradScaler.step``, which calls ``step`` without a closure, leaving SAM
    no second pass. This replacement takes the update as trickbag's Trainer does with fp16: the first pass (Lightning's
    closure, scaled backward), ``unscale_`` and ``on_before_optimizer_step`` (the guard, clipping); an overflow there
    skips the update before any perturbation; else SAM's step with a second pass that re-runs the closure on the same
    batch, unscales its gradients by hand (the GradScaler unscales once per update), skips the update on an overflow
    (SAM puts the weights back, the scale backs off) and runs ``on_before_optimizer_step`` again on the gradients the
    update uses. The scale grows or backs off once per update, as the GradScaler's own step would."""
    from trickbag.train import stepping

    def optimizer_step(optimizer: Any, model: Any, closure: Any, **kwargs: Any) -> Any:
        scaler = plugin.scaler
        first = closure()
        if first is None and getattr(model, "automatic_optimization", True):
            return first  # training_step returned None: Lightning skipped the backward, nothing to step
        scaler.unscale_(optimizer)
        plugin._after_closure(model, optimizer)  # on_before_optimizer_step: the callback's guard and clipping
        if state.step_skipped or not stepping.finite_grads(optimizer):
            scaler.update()  # vetoed, or the first pass overflowed (unscale_ recorded it: the scale backs off)
            optimizer.zero_grad(set_to_none=True)
            return first

        def second_pass() -> Any:
            state.closure_pass = True
            try:
                loss = closure()
                stepping.unscale_second_pass(optimizer, scaler)
                plugin._after_closure(model, optimizer)  # the gradients the update uses: guard and clip them too
                if state.step_skipped:
                    raise stepping.VetoedUpdate
                return loss
            finally:
                state.closure_pass = False

        try:
            type(optimizer).step(optimizer, second_pass)
        except stepping.Overflow:
            optimizer.zero_grad(set_to_none=True)
            scaler.update(new_scale=scaler.get_scale() * scaler.get_backoff_factor())
        except stepping.VetoedUpdate:
            optimizer.zero_grad(set_to_none=True)
            scaler.update()
        else:
            scaler.update()
        return first

    return optimizer_step
