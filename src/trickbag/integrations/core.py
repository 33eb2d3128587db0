"""The framework-neutral half of trickbag's adapters: a :class:`TrickSession` runs recipe tricks inside another
framework's training loop (Lightning's, Hugging Face's) with the semantics of trickbag's own Trainer.

An adapter makes one session from the user's arguments (validated at once, before training), hands it the model,
optimizer and training loader when the framework has built them (:meth:`TrickSession.set_up`), then calls the
session at the framework's hooks in the Trainer's order::

    fit_start()                                  once, before the first batch
    epoch_start(epoch, batches_per_epoch)        every epoch
    batch_start(batch, batch_idx) -> batch       every micro-batch, before forward (batch tricks: mix, cutout, ...)
    loss(output, target) -> loss                 the training loss (loss tricks), weighted for exact accumulation
    before_update() -> vetoed                    once per update, gradients complete and unscaled: AFTER_BACKWARD,
                                                 the non-finite guard, clipping; vetoed: the gradients are dropped
    after_update(vetoed)                         after the optimizer step: STEP (EMA/SWA update)
    eval_start() / eval_end(metrics)             around evaluation (EMA/SWA swap their average in and out)
    epoch_end() / fit_end()

:meth:`TrickSession.state_dict` holds what a resume needs (every plug-in's state incl. the tricks' generators, the
guard's counters, the session's counters and the RNG); the adapter stores it in the framework's own checkpoint.

What the framework owns is refused in one line each (:data:`REFUSED`); ``docs/integrations.md`` lists the same table
(a test keeps them equal).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch

from trickbag import runtime
from trickbag.errors import RecipeError

__all__ = ["REFUSED", "TrickSession", "split_batch", "NONFINITE", "MINIMUM", "require"]

#: tricks an adapter refuses, and why: the framework owns what they change
REFUSED: dict[str, str] = {
    "compile": "the framework owns compilation (Lightning: torch.compile(module) before fit; HF: torch_compile=True)",
    "channels_last": "the framework moves the model and the batches; convert the model yourself before fit",
    "multiscale": "the framework owns evaluation, which would not see the test-size fine-tuning; resize in your data",
    "tta": "evaluation is the framework's (validation_step / evaluate), which trickbag's test-time augmentation "
           "does not reach",
    "profile": "the framework has its own profiler (Lightning: profiler=; HF: the torch profiler callback)",
    "augment": "it edits a trickbag data source's image pipeline; put the policy in your dataset's transforms",
}

#: the oldest release of each framework the adapters pass their tests with (pyproject's extras say the same);
#: tools/framework_versions.sh runs tests/integrations against a given release
MINIMUM: dict[str, tuple[int, ...]] = {"lightning": (2, 5, 3), "transformers": (5, 24), "accelerate": (1, 7)}


def require(package: str, installed: str) -> None:
    """Refuse, in one line, an installed framework release older than :data:`MINIMUM` (its tests fail there).
    ``TRICKBAG_ANY_FRAMEWORK_RELEASE=1`` lifts the check, for tools/framework_versions.sh to try an older one."""
    import os

    from trickbag.errors import MissingExtraError

    if os.environ.get("TRICKBAG_ANY_FRAMEWORK_RELEASE") == "1":
        return
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", installed)
    need = MINIMUM[package]
    if found is None or (int(found[1]), int(found[2]), int(found[3] or 0))[:len(need)] < need:
        want = ".".join(map(str, need))
        raise MissingExtraError(f"trickbag.integrations needs {package}>={want}, installed is {installed}: "
                                f"pip install -U '{package}>={want}'")


#: the non-finite guard's settings an adapter takes (``nonfinite=``)
NONFINITE = ("skip", "stop")

_INPUT_KEYS = ("x", "input", "inputs", "image", "images", "pixel_values", "input_ids")
_LABEL_KEYS = ("y", "label", "labels", "target", "targets")


def split_batch(batch: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``((x, y, *rest), put_back)`` of a tuple/list or dict batch: what batch tricks see, and
    ``put_back(new)`` giving the batch in its own form with ``new``'s input and labels.

    >>> t, back = split_batch({"pixel_values": 1, "labels": 2, "id": 3})
    >>> t, back((10, 20))
    ((1, 2), {'pixel_values': 10, 'labels': 20, 'id': 3})
    """
    if isinstance(batch, dict):
        xk = next((k for k in _INPUT_KEYS if k in batch), None)
        yk = next((k for k in _LABEL_KEYS if k in batch), None)
        if xk is None or yk is None:
            raise RecipeError(f"the batch tricks need the inputs and labels of a dict batch: one of {_INPUT_KEYS} "
                              f"and one of {_LABEL_KEYS}; the batch has {sorted(batch)}")
        return (batch[xk], batch[yk]), lambda new: {**batch, xk: new[0], yk: new[1]}
    if isinstance(batch, (tuple, list)) and len(batch) >= 2:
        return tuple(batch), lambda new: type(batch)(new) if isinstance(batch, list) else tuple(new)
    raise RecipeError(f"the batch tricks need (inputs, labels, ...) or a dict batch; got {type(batch).__name__}")


def _schedule_section(schedule: Any) -> Any:
    if schedule is None:
        return None
    from trickbag.recipe import recipe_from_dict

    if not isinstance(schedule, dict):
        raise RecipeError(f"schedule= takes a recipe's schedule section (a dict such as {{'name': 'cosine', "
                          f"'warmup_epochs': 1}}), not a {type(schedule).__name__}")
    return recipe_from_dict({"schedule": schedule}).schedule  # the recipe's own validation and one-line errors


def _guard(nonfinite: Any, max_nonfinite: int) -> Any:
    if nonfinite is None:
        return None
    if nonfinite not in NONFINITE:
        raise RecipeError(f"nonfinite={nonfinite!r}: use one of {', '.join(NONFINITE)} or None (off)")
    from trickbag.train.nonfinite import NonFiniteGuard

    return NonFiniteGuard(nonfinite, max_nonfinite, out=sys.stderr)


class TrickSession:
    """Recipe tricks run inside another framework's loop (see the module's docstring for the call order).

    Args:
        tricks: exactly a recipe's ``tricks:`` section, e.g. ``{"ema": {"decay": 0.99}, "clip": {"max_norm": 1}}``
            (a trick named is switched on); validated here, a typo is one :class:`RecipeError` naming the key.
        schedule: a recipe's ``schedule:`` section (``{"name": "cosine", "warmup_epochs": 1}``), stepped once per
            update; None: the framework's (or no) schedule.
        nonfinite: the non-finite guard, ``"skip"`` or ``"stop"`` (``max_nonfinite`` skipped updates in a row);
            None: off.
        framework: the framework's name, for the messages.
    """

    def __init__(self, tricks: dict[str, Any] | None = None, *, schedule: dict[str, Any] | None = None,
                 nonfinite: str | None = None, max_nonfinite: int = 5, framework: str = "the framework") -> None:
        from trickbag.train.setup import tricks_section

        self.framework = framework
        self.section = tricks_section(dict(tricks or {}))
        for name, why in REFUSED.items():
            if getattr(self.section, name).enabled:
                raise RecipeError(f"tricks.{name} is refused under {framework}: {why}")
        self.schedule = _schedule_section(schedule)
        self.guard = _guard(nonfinite, max_nonfinite)
        self.plugins: list[Any] = []
        self.state: Any = None
        self.clip: Any = None
        self.counts: Any = None
        self.loss_tricks = False  # a trick changes the loss or the targets: the module must use loss()
        self.changes_loss = False  # a trick replaced the loss function or handles LOSS (the targets aside)
        self.updates_per_epoch = 0
        self.base_loss: Any = None

    def enabled(self, name: str) -> bool:
        """Whether trick ``name`` is switched on."""
        return bool(getattr(self.section, name).enabled)

    # ------------------------------------------------------------------ set-up
    def set_up(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, train_loader: Any, *, epochs: int,
               accumulate: int, loss_fn: Any = None, task: Any = None, seed: int | None = None, clip: Any = None,
               monitor: str = "val/loss", mode: str = "min", dist: Any = None,
               device: torch.device | None = None, precision: str = "32",
               optimizer_kw: dict[str, Any] | None = None, build_schedule: bool = True,
               total_updates: int | None = None) -> None:
        """Check and build the tricks on the framework's model, optimizer and training loader; afterwards read
        :attr:`optimizer`, :attr:`scheduler` (None unless ``schedule=`` was given), :attr:`clip`.

        ``precision``: the framework's (what the plug-ins see); ``optimizer_kw``: options for an optimizer the tricks
        rebuild beyond the user's optimizer's own (HF's ``weight_decay``); ``build_schedule=False``: the framework
        builds and steps the ``schedule=`` scheduler itself (HF), the session only validated the section;
        ``total_updates``: the run's updates as the framework counts them (its ``max_steps``, ``limit_train_batches``),
        the ``schedule=`` horizon (default: ``epochs`` x the loader's updates)."""
        from trickbag.nn import device_of
        from trickbag.plugin.assemble import assemble
        from trickbag.plugin.events import Event
        from trickbag.plugin.state import State
        from trickbag.train.setup import bare_context, build_sections, check_interactions, trainer_facts
        from trickbag.train.stepping import ExactAccumulation
        from trickbag.train.tasks import Classification

        dist = dist or runtime.DistInfo()
        task = task or Classification(num_classes=None)
        given_loss = loss_fn or task.loss
        check_interactions(trainer_facts(self.section, task=task.name, epochs=epochs, clip=clip, monitor=monitor,
                                         optimizer=optimizer, world_size=dist.world_size))
        seed = torch.initial_seed() % 2**32 if seed is None else seed
        ctx = bare_context(model, optimizer, train_loader, epochs=epochs, loss_fn=given_loss, seed=seed,
                           accumulate=accumulate, task=task, clip=clip, device=device, dist=dist)
        if optimizer_kw:
            import functools

            ctx.make_optimizer = functools.partial(ctx.make_optimizer, **optimizer_kw)
        built = build_sections(self.section)
        make = self._make_schedule(ctx, epochs, mode, total_updates) if build_schedule else (lambda opt: None)
        done = assemble(ctx, built, schedule=make, keep=optimizer)
        self.plugins, new_opt, scheduler = done.plugins, done.optimizer, done.scheduler
        device = device or device_of(model)
        if ctx.model is not model:
            raise RecipeError(f"a trick replaced the model object, which {self.framework} holds; turn it off")
        self.base_loss = given_loss  # the task's own loss (evaluation's)
        self.changes_loss = ctx.loss_fn is not given_loss or any(p.handles(Event.LOSS) for p in self.plugins)
        self.loss_tricks = self.changes_loss or self.enabled("mix")
        self.clip = ctx.clip
        self.updates_per_epoch = ctx.updates_per_epoch
        self.state = State(model=model, optimizer=new_opt, task=task, loss_fn=ctx.loss_fn,
                           train_loader=train_loader, val_loader=None, device=device, precision=precision,
                           accumulate=accumulate, max_epochs=epochs, scheduler=scheduler,
                           scaler=torch.amp.GradScaler(device.type, enabled=False), dist=dist,
                           monitor=monitor, mode=mode)
        self.counts = ExactAccumulation(self.state)

    def _make_schedule(self, ctx: Any, epochs: int, mode: str, total: int | None = None
                       ) -> Callable[[torch.optim.Optimizer], Any]:
        def make(optimizer: torch.optim.Optimizer) -> Any:
            if self.schedule is None:
                return None
            from trickbag.optim import optimizers
            from trickbag.train.parts import build_schedule

            try:
                name = optimizers.name_of(optimizer)
            except Exception:  # noqa: BLE001 (a user's optimizer trickbag does not know: not schedule-free)
                name = "sgd"
            recipe = SimpleNamespace(schedule=self.schedule, optim=SimpleNamespace(name=name),
                                     train=SimpleNamespace(epochs=epochs))
            return build_schedule(recipe, optimizer, ctx.updates_per_epoch, [], mode,  # type: ignore[arg-type]
                                  total_steps=total)
        return make

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer the framework must step (the user's, or one the tricks rebuilt)."""
        return self.state.optimizer

    @property
    def scheduler(self) -> Any:
        """The ``schedule=`` scheduler (step once per update that was not vetoed), or None."""
        return self.state.scheduler

    # ------------------------------------------------------------------ events
    def _emit(self, event: Any) -> None:
        from trickbag.plugin.events import REVERSED_EVENTS

        order = reversed(self.plugins) if event in REVERSED_EVENTS else self.plugins
        for p in order:
            if p.handles(event):
                getattr(p, "on_" + event.value)(self.state)

    def handles(self, event: Any) -> bool:
        """Whether a plug-in handles ``event`` (a :class:`trickbag.plugin.events.Event`)."""
        return any(p.handles(event) for p in self.plugins)

    def fit_start(self) -> None:
        """FIT_START (and the guard's start)."""
        from trickbag.plugin.events import Event

        if self.guard is not None:
            self.guard.start(self.state)
        self._emit(Event.FIT_START)

    def epoch_start(self, epoch: int, batches_per_epoch: int) -> None:
        """EPOCH_START of epoch ``epoch`` (0-based) with ``batches_per_epoch`` micro-batches (0: unknown)."""
        from trickbag.plugin.events import Event

        self.state.epoch, self.state.batches_per_epoch = epoch, batches_per_epoch
        self.state.epoch_metrics = {}  # the plug-ins' per-epoch values (grad_norm's), as trickbag's Trainer
        self._emit(Event.EPOCH_START)

    def batch_start(self, batch: Any, batch_idx: int,
                    split: Callable[[Any], tuple[Any, Callable[[Any], Any]]] = split_batch) -> Any:
        """BATCH_START on micro-batch ``batch_idx``: the batch as the batch tricks left it, in its own form
        (``split``: where the inputs and labels are, :func:`split_batch` unless the framework knows better)."""
        from trickbag.plugin.events import Event

        s = self.state
        plain, put_back = split(batch)
        s.batch_idx, s.batch = batch_idx, plain
        self._emit(Event.BATCH_START)
        if self.guard is not None:
            self.guard.before_batch()
        return put_back(s.batch) if s.batch is not plain else batch

    def update_size(self) -> tuple[int, bool]:
        """(micro-batches in the current update, whether the current micro-batch is its last)."""
        from trickbag.train.bookkeeping import update_size

        s = self.state
        return update_size(s.batch_idx, s.accumulate, s.batches_per_epoch)

    def loss(self, output: torch.Tensor, target: Any = None, *, framework_divides: bool = True) -> torch.Tensor:
        """The training loss of ``output`` (the tricks' loss, LOSS plug-ins, the guard's watch), weighted for
        exact accumulation. ``target``: the labels (default: the current batch's, as the batch tricks made them).
        ``framework_divides``: the framework divides the returned loss by the accumulation itself (Lightning)."""
        s = self.state
        self.plain_loss(output, target)
        size, _ = self.update_size()
        weighted = self.counts.weighted(s.loss, size)
        return weighted * s.accumulate if framework_divides and (size > 1 or s.accumulate > 1) else weighted

    def eval_loss(self, output: torch.Tensor, target: Any) -> torch.Tensor:
        """The loss of an evaluation batch: the task's own loss of ``output`` against ``target`` (no trick changes
        it, no guard watches it, nothing of training's state is touched), comparable from run to run."""
        return self.base_loss(output, target)

    def plain_loss(self, output: torch.Tensor, target: Any = None) -> torch.Tensor:
        """The training loss of ``output`` with the loss tricks (LOSS plug-ins, the guard's watch), not weighted:
        ``state.loss``. ``target``: the labels (default: the current batch's)."""
        from trickbag.plugin.events import Event

        s = self.state
        if target is not None:
            s.batch = (s.batch[0], target, *s.batch[2:]) if s.batch is not None else (None, target)
        s.output = output
        s.loss = s.loss_fn(output, s.batch[1])
        self._emit(Event.LOSS)
        if self.guard is not None:
            self.guard.watch_loss(s.loss)
        return s.loss

    def before_update(self, *, exact: bool = True) -> bool:
        """Once per update, the gradients complete and unscaled: exact accumulation's correction (``exact``),
        AFTER_BACKWARD, the guard and clipping. True: the update is vetoed and its gradients were dropped (the
        framework's step then changes nothing)."""
        from trickbag.plugin.events import Event
        from trickbag.train import stepping

        s = self.state
        if exact:
            self.counts.normalise(self.update_size()[0])
        s.step_skipped, s.veto_reason = False, ""
        self._emit(Event.AFTER_BACKWARD)
        if (self.guard is not None and self.guard.vetoes(s)) or s.step_skipped:
            s.optimizer.zero_grad(set_to_none=True)
            s.step_skipped = True
            s.skipped_steps += 1
            return True
        norm = stepping.clip_gradients(s.optimizer, self.clip)
        if norm is not None:
            s.grad_norm = norm
        return False

    def after_update(self) -> None:
        """After the optimizer step: the update counter, the ``schedule=`` step (not after a veto), STEP."""
        from trickbag.plugin.events import Event

        s = self.state
        if not s.step_skipped:
            s.step += 1
            if s.scheduler is not None and not isinstance(s.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
                s.scheduler.step()
        self._emit(Event.STEP)
        s.step_skipped = False

    def eval_start(self) -> None:
        """EVAL_START: EMA/SWA put their average into the model."""
        from trickbag.plugin.events import Event

        self._emit(Event.EVAL_START)

    def eval_end(self, metrics: dict[str, float] | None = None) -> None:
        """EVAL_END: the raw weights go back."""
        from trickbag.plugin.events import Event

        self.state.eval_metrics = dict(metrics or {})
        self._emit(Event.EVAL_END)

    def epoch_end(self, metrics: dict[str, float] | None = None) -> None:
        """EPOCH_END; a plateau ``schedule=`` steps with the monitored metric."""
        from trickbag.plugin.events import Event

        s = self.state
        s.metrics = dict(metrics or {})
        if isinstance(s.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau) and s.monitor in s.metrics:
            s.scheduler.step(s.metrics[s.monitor])
        self._emit(Event.EPOCH_END)
        s.batch = s.output = s.loss = None

    def checkpoint(self) -> None:
        """CHECKPOINT (the framework is writing a checkpoint)."""
        from trickbag.plugin.events import Event

        self._emit(Event.CHECKPOINT)

    def fit_end(self) -> None:
        """FIT_END (EMA/SWA copy the kept weights into the model)."""
        from trickbag.plugin.events import Event

        self._emit(Event.FIT_END)

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict[str, Any]:
        """What a resume needs besides the model and optimizer the framework saves: every stateful plug-in (the
        tricks' generators with them), the guard, the counters, the schedule and the RNG."""
        s = self.state
        return {
            "plugins": {p.key: sd for p in self.plugins if (sd := p.state_dict()) is not None},
            "guard": self.guard.state_dict() if self.guard is not None else None,
            "counters": {"step": s.step, "skipped_steps": s.skipped_steps, "epoch": s.epoch},
            "scheduler": s.scheduler.state_dict() if s.scheduler is not None else None,
            "rng": runtime.get_rng_state(),
        }

    def load_state_dict(self, sd: dict[str, Any], *, rng: bool = True) -> None:
        """Restore :meth:`state_dict` output (``rng=False``: leave the RNG to the caller)."""
        s = self.state
        for p in self.plugins:
            if p.key in sd["plugins"]:
                p.load_state_dict(sd["plugins"][p.key])
        if self.guard is not None and sd.get("guard") is not None:
            self.guard.load_state_dict(sd["guard"])
        c = sd["counters"]
        s.step, s.skipped_steps, s.epoch = c["step"], c["skipped_steps"], c["epoch"]
        if s.scheduler is not None and sd.get("scheduler") is not None:
            s.scheduler.load_state_dict(sd["scheduler"])
        if rng:
            runtime.set_rng_state(sd["rng"])
