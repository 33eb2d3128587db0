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

SAM, DeepSpeed and manual optimization are refused in one line (see :data:`REFUSED_HERE`).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from trickbag.errors import RecipeError
from trickbag.integrations.core import TrickSession

try:
    import lightning.pytorch as pl
except ImportError:  # pragma: no cover - the older package name
    import pytorch_lightning as pl  # type: ignore[no-redef]

__all__ = ["TricksCallback", "REFUSED_HERE"]

#: what this adapter refuses besides :data:`trickbag.integrations.core.REFUSED`, and why
REFUSED_HERE: dict[str, str] = {
    "sam": "Lightning's optimizer closure runs the first pass inside optimizer.step, after SAM would have "
           "perturbed the weights; not supported by this adapter yet",
    "deepspeed": "DeepSpeed owns the optimizer step, gradient clipping and accumulation; use strategy='ddp' or 'fsdp'",
    "manual_optimization": "the tricks hook Lightning's automatic optimization; a module with "
                           "automatic_optimization=False steps its own optimizer",
    "gradient_clip_val": "Trainer(gradient_clip_val=...) and tricks.clip would both clip; keep one of them",
    "scheduler+schedule": "the module's LR scheduler and schedule= would both set the learning rate; keep one",
    "scheduler+groups": "the tricks rebuilt the optimizer's parameter groups, so the module's LR scheduler would "
                        "step the replaced optimizer; pass schedule= (a recipe's schedule section) instead",
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
        if self.session.enabled("sam"):
            raise _refuse("sam")
        self.audit = audit
        self.audit_report: Any = None
        self._audit: Any = None
        self.loss_fn, self.seed, self.num_classes = loss_fn, seed, num_classes
        self._ready = False
        self._loaded: dict[str, Any] | None = None
        self._loss_called = False
        self._checked_loss = False
        self._trainer_loader: Any = None

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

        s.set_up(pl_module, user_opt, trainer.train_dataloader, epochs=trainer.max_epochs,
                 accumulate=trainer.accumulate_grad_batches, loss_fn=self.loss_fn, seed=self.seed,
                 task=Classification(num_classes=self.num_classes),
                 clip=None, dist=dist, device=pl_module.device)
        if s.optimizer is not user_opt:
            if has_sched:
                raise _refuse("scheduler+groups")
            trainer.strategy.optimizers = [s.optimizer]
        pl_module.trickbag_loss = self._loss
        pl_module.training_step = self._wrap_step(pl_module.training_step)
        self._ready = True
        self._trainer_loader = trainer.train_dataloader
        if self._loaded is not None:
            s.load_state_dict(self._loaded)
            _loader_generators(trainer.train_dataloader, self._loaded.get("loader"))
            self._loaded = None
        if self.audit:
            from trickbag.audit import audit

            self._audit = audit(pl_module, s.optimizer, report=True)
            self.audit_report = self._audit.__enter__()
        s.fit_start()

    def _wrap_step(self, step: Any) -> Any:
        @functools.wraps(step)
        def training_step(*given: Any, **kwargs: Any) -> Any:  # Lightning passes them by position or (DDP) name
            args = list(given)
            batch = args[0] if args else kwargs["batch"]
            batch_idx = args[1] if len(args) > 1 else kwargs["batch_idx"]
            batch = self.session.batch_start(batch, batch_idx)
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
        if target is not None and self.session.enabled("mix"):
            target = None  # mix made the targets: the batch's labels are the soft ones the module was handed
        return self.session.loss(output, target if target is not None else s.batch[1])

    # ------------------------------------------------------------------ the loop
    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        n = trainer.num_training_batches
        self.session.epoch_start(trainer.current_epoch, int(n) if n != float("inf") else 0)

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        if self._ready:
            self.session.before_update()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._ready and self.session.update_size()[1]:
            self.session.after_update()

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        if self._ready and trainer.training is False and trainer.state.fn == "fit":
            self.session.eval_start()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self._ready and trainer.state.fn == "fit":
            self.session.eval_end({k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1})

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        if self._ready:
            self.session.epoch_end({k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1})

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
        self._ready = False

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        if not self._ready:
            return {}
        return {**self.session.state_dict(), "loader": _loader_generators(self._trainer_loader, None)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._loaded = state_dict or None  # applied once the tricks are set up (on_train_start)


def _loader_generators(loader: Any, states: list[Any] | None) -> list[Any]:
    """The states of the training loader's own generators (the loader's, its sampler's), which Lightning's checkpoint
    does not hold: read (``states`` None) or restored, so the next epoch draws the straight run's order and worker
    seeds."""
    found = [getattr(loader, "generator", None), getattr(getattr(loader, "sampler", None), "generator", None)]
    if states is None:
        return [g.get_state() if isinstance(g, torch.Generator) else None for g in found]
    for g, st in zip(found, states):
        if isinstance(g, torch.Generator) and st is not None:
            g.set_state(st)
    return states
