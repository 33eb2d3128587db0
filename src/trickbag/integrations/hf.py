"""trickbag's tricks inside the Hugging Face ``transformers.Trainer``.

``TricksCallback(tricks=..., nonfinite=...)`` holds the tricks (validated as a recipe's ``tricks:`` section when it is
made) and maps HF's hooks to trickbag's events; ``TricksTrainer`` is the ``Trainer`` with the few hooks HF lacks
(the batch before the forward, the loss, evaluation on averaged weights, trickbag's state in HF's checkpoints).

The events are fired by the framework-neutral :class:`trickbag.integrations.core.TrickSession`, the Lightning
adapter's too (one code path). Hook map (trickbag event <- HF)::

    set-up          TricksTrainer.create_optimizer (after HF made its optimizer, before accelerate wraps it)
    FIT_START       on_train_begin
    EPOCH_START     on_epoch_begin
    BATCH_START     TricksTrainer.training_step, per micro-batch, on the prepared input dict
    LOSS            compute_loss_func (installed by TricksTrainer when a trick changes the loss)
    AFTER_BACKWARD  on_pre_optimizer_step; then the non-finite guard, then trickbag's clipping rule
    STEP            on_step_end (after HF's optimizer and schedule step)
    EVAL_START/END  around TricksTrainer.evaluate
    EPOCH_END       on_epoch_end
    CHECKPOINT      on_save: trickbag-rank<r>.pt written into checkpoint-N/
    FIT_END         on_train_end

Loss normalisation: HF's ``num_items_in_batch`` wins. It is the count of labels that enter the loss (``!= -100``,
shifted for causal LMs) over the update's micro-batches, and over the processes when
``average_tokens_across_devices`` (required under several processes); a trick's loss is the mean over one
micro-batch's counted items times ``n_i / num_items_in_batch``, so any split of a batch into micro-batches gives
the big batch's gradient (trickbag's exact count weighting; transformers #34191).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, cast

import torch

from trickbag import runtime
from trickbag.errors import ConflictError, RecipeError
from trickbag.integrations.core import REFUSED as CORE_REFUSED
from trickbag.integrations.core import TrickSession, require
from trickbag.plugin.events import Event
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State
from trickbag.tricks.base import GeneratorState

try:
    import accelerate
    import transformers
    from transformers import Trainer, TrainerCallback
except ImportError as exc:  # pragma: no cover - the extra is missing
    from trickbag.errors import MissingExtraError

    raise MissingExtraError("trickbag.integrations.hf needs transformers: pip install 'trickbag[hf]'") from exc
require("transformers", transformers.__version__)
require("accelerate", accelerate.__version__)

__all__ = ["TricksCallback", "TricksTrainer", "REFUSED", "HF_REFUSED"]

#: tricks refused in the HF Trainer beyond the core's (what every framework owns), and why
HF_REFUSED = {
    "swa": "SWA's BatchNorm recalibration is not wired into the HF Trainer yet; use tricks.ema",
    "distillation": "the teacher's forward on HF batch dicts is not wired yet; use trickbag's Trainer",
}
#: every trick refused in the HF Trainer, and why
REFUSED = {**CORE_REFUSED, **HF_REFUSED}
#: the input keys batch tricks look for in an HF batch dict, in this order
INPUT_KEYS = ("pixel_values", "input_values", "input_features", "input_ids", "inputs", "x")
#: the file trickbag's state is written to inside HF's checkpoint-N/ folder
STATE_FILE = "trickbag-rank{rank}.pt"


def _refuse_tricks(section: Any) -> None:
    for name, why in HF_REFUSED.items():
        if getattr(section, name).enabled:
            raise RecipeError(f"tricks.{name} is refused in the HF Trainer: {why}")


def refuse_args(args: Any, section: Any, schedule: Any = None) -> None:
    """The TrainingArguments that collide with trickbag, each refused in one line naming the fix."""
    if schedule is not None and (getattr(args, "lr_scheduler_type", "constant") != "constant"
                                 or getattr(args, "warmup_steps", 0) or getattr(args, "warmup_ratio", 0)):
        raise ConflictError(f"schedule= and lr_scheduler_type={getattr(args, 'lr_scheduler_type', '?')!s} (with its "
                            "warm-up) both set the learning rate; pass lr_scheduler_type='constant', warmup_steps=0 "
                            "to let schedule= own it, or drop schedule=")
    if getattr(args, "deepspeed", None):
        raise ConflictError("DeepSpeed owns the optimizer step, gradients and weights (ZeRO shards them) where "
                            "trickbag's tricks act; train without deepspeed=")
    if getattr(args, "load_best_model_at_end", False) and (section.ema.enabled or section.swa.enabled):
        raise ConflictError("load_best_model_at_end=True with tricks.ema/swa: HF's checkpoints hold the raw weights "
                            "while the evaluation that ranks them ran on the averaged ones, so the 'best' model would "
                            "be neither; set load_best_model_at_end=False (training ends on the averaged weights)")
    if getattr(args, "label_smoothing_factor", 0) and (section.label_smoothing.enabled or section.mix.enabled):
        raise ConflictError("label_smoothing_factor and tricks.label_smoothing/mix both smooth the targets; set "
                            "label_smoothing_factor=0")
    if getattr(args, "world_size", 1) > 1 and not getattr(args, "average_tokens_across_devices", True):
        raise ConflictError("average_tokens_across_devices=False gives each process its own count, so the loss is "
                            "not the big batch's; set it True")


def _logits(outputs: Any) -> torch.Tensor:
    if isinstance(outputs, Mapping):
        if "logits" not in outputs:
            raise RecipeError(f"the model's output has no 'logits' (keys: {sorted(outputs)}); a loss trick needs them")
        return outputs["logits"]
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def counted(logits: torch.Tensor, labels: torch.Tensor, shift: bool) -> tuple[torch.Tensor, torch.Tensor, int | Any]:
    """The outputs and targets that enter the loss, and their count: hard labels flattened with the ``-100``
    ones left out (shifted by one for a causal LM); soft (mixed) targets ``[N, C]`` as they are."""
    if labels.is_floating_point():
        return logits, labels, labels.shape[0]
    if shift:
        logits, labels = logits[..., :-1, :], labels[..., 1:]
    keep = labels.reshape(-1) != -100
    out = logits.reshape(-1, logits.shape[-1])[keep]
    return out, labels.reshape(-1)[keep], keep.sum()


@dataclasses.dataclass
class _Run:
    """What one ``train()`` set up: the session that runs the tricks, and the HF-side bookkeeping."""

    session: TrickSession
    losses_seen: int = 0
    vetoed: Any = None  # a vetoed update: HF's schedule position, put back after HF steps it
    scale: float | None = None  # fp16: the GradScaler's scale when the update's gradients were complete
    overflow: bool = False  # fp16 with SAM: the second pass overflowed (the scale backs off after HF's update)

    @property
    def state(self) -> State:
        return cast(State, self.session.state)

    @property
    def plugins(self) -> list[Plugin]:
        return self.session.plugins

    @property
    def clip(self) -> Any:
        return self.session.clip

    @property
    def changes_loss(self) -> bool:
        """A trick changes the loss or the targets (mix): HF's compute_loss_func is the tricks' (a model's own loss
        would read mixed, float targets as multi-label ones)."""
        return self.session.loss_tricks

    @property
    def updates(self) -> int:  # optimizer updates in one epoch
        return self.session.updates_per_epoch


class TricksCallback(TrainerCallback):
    """trickbag's tricks in an HF ``Trainer``; pass it in ``callbacks=[...]`` of a :class:`TricksTrainer`.

    Args:
        tricks: what a recipe's ``tricks:`` section takes, e.g. ``{"ema": {"decay": 0.999}, "label_smoothing": {}}``;
            validated here (a typo is one error naming the key).
        nonfinite: ``"skip"`` or ``"stop"`` updates with a NaN/Inf loss or gradient; None: off.
        audit: watch the run with trickbag's runtime audit (:func:`trickbag.audit.audit`) and print its report when
            ``train()`` ends; the report is :attr:`audit_report`.
        schedule: a recipe's ``schedule:`` section (``{"name": "cosine", "warmup_epochs": 1}``), stepped by HF once
            per update; it needs ``lr_scheduler_type="constant"`` and no warm-up in the TrainingArguments.
    """

    def __init__(self, tricks: Mapping[str, Any] | None = None, *, schedule: Any = None,
                 nonfinite: str | None = None, audit: bool = False) -> None:
        # the core validates tricks= and schedule= as a recipe's sections and refuses what every framework owns
        self._tricks, self._schedule = dict(tricks or {}), schedule
        checked = TrickSession(self._tricks, schedule=schedule, framework="the HF Trainer")
        self.section, self.schedule = checked.section, checked.schedule
        _refuse_tricks(self.section)
        if not isinstance(audit, bool):
            raise RecipeError(f"audit={audit!r}: allowed are True (watch the run, report when train() ends) or False")
        self.audit, self.audit_report, self._audit = audit, None, None
        if nonfinite not in (None, "skip", "stop"):
            raise RecipeError(f"nonfinite={nonfinite!r}: allowed are 'skip', 'stop' or None")
        self.nonfinite = nonfinite
        self.run: _Run | None = None

    @property
    def guard(self) -> Any:
        """The non-finite guard of the run (None: off, or not set up yet)."""
        return self.run.session.guard if self.run is not None else None

    # ------------------------------------------------------------------ set-up
    def set_up(self, trainer: Any) -> None:
        """Set the tricks up on the trainer's model and optimizer (TricksTrainer.create_optimizer calls it)."""
        from trickbag.train.tasks import Classification

        args = trainer.args
        refuse_args(args, self.section, self.schedule)
        epochs = max(1, math.ceil(args.num_train_epochs))
        dist = runtime.dist_info()
        loader = torch.utils.data.DataLoader(trainer.train_dataset, batch_size=args.per_device_train_batch_size)
        task = Classification(num_classes=_num_outputs(trainer) or None)
        tricks = _keep_hf_no_decay(self._tricks, self.section, args.weight_decay)
        # a session per train(): the tricks' plug-ins are built afresh on this trainer's model and optimizer
        session = TrickSession(tricks, schedule=self._schedule, nonfinite=self.nonfinite, framework="the HF Trainer")
        # the groups a trick rebuilds get HF's weight decay (torch's AdamW default is not the user's choice); HF
        # builds and steps the schedule= scheduler itself (create_scheduler)
        session.set_up(trainer.model, trainer.optimizer, loader, epochs=epochs,
                       accumulate=args.gradient_accumulation_steps, task=task, seed=args.seed, dist=dist,
                       device=args.device, precision="bf16" if args.bf16 else "16" if args.fp16 else "32",
                       optimizer_kw={"weight_decay": args.weight_decay}, build_schedule=False)
        if session.guard is not None and not dist.is_main:
            session.guard.out = None
        changes_loss = session.loss_tricks
        problem = getattr(getattr(trainer.model, "config", None), "problem_type", None)
        if changes_loss and problem in ("regression", "multi_label_classification"):
            raise RecipeError(f"the loss tricks here replace a single-label classification (or token) loss; the "
                              f"model's problem_type={problem} is not one: turn the loss tricks off")
        if changes_loss and trainer.compute_loss_func is not None:
            raise ConflictError("a trick changes the loss and the Trainer already has compute_loss_func; keep one")
        if session.clip is not None and args.max_grad_norm > 0:
            print(f"trickbag: tricks.clip takes over gradient clipping (max_grad_norm={args.max_grad_norm} -> 0)",
                  file=sys.stderr)
            args.max_grad_norm = 0.0
        scaler = getattr(trainer.accelerator, "scaler", None)
        if scaler is not None and scaler.is_enabled():  # fp16: inf gradients are the GradScaler's business, and an
            session.state.scaler = scaler  # update it skips is no update (no step count, schedule or EMA)
        trainer.optimizer = session.optimizer
        self.run = _Run(session)

    def _need(self) -> _Run:
        if self.run is None:
            raise RecipeError("TricksCallback needs trickbag.integrations.hf.TricksTrainer: the HF Trainer has no hook "
                              "for the batch, the loss, evaluation on averaged weights or trickbag's checkpoint state")
        return self.run

    def emit(self, event: Event) -> None:
        self._need().session._emit(event)

    # ------------------------------------------------------------------ HF hooks
    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        run = self._need()
        run.state.step = state.global_step
        if self.audit:
            from trickbag.audit import audit

            # every scheduler on the optimizer is watched (HF's and any a user steps), not only HF's
            watch = audit(run.state.model, run.state.optimizer, report=True)
            self._audit, self.audit_report = watch, watch.__enter__()
        run.session.fit_start()

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        run = self._need()
        run.session.epoch_start(int(state.epoch or 0), run.state.batches_per_epoch)

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        run = self._need()
        if run.changes_loss and run.losses_seen == 0:
            raise RecipeError("a loss trick is on but the Trainer never called its compute_loss_func (a compute_loss "
                              "that ignores it): the update would be silently unmixed/unsmoothed")
        run.losses_seen = 0
        s = run.state
        # (fp16: HF's gradient norm has unscaled the gradients already, through accelerate's clip_grad_norm_)
        run.scale = s.scaler.get_scale() if s.scaler.is_enabled() else None
        # HF's loss is already normalised by num_items_in_batch: no count correction (exact=False)
        if run.session.before_update(exact=False):  # vetoed: the gradients are gone, the update counted skipped
            run.vetoed = _schedule_position(s, kw.get("lr_scheduler"))
            if s.should_stop:
                control.should_training_stop = True

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        run = self._need()
        s = run.state
        run.losses_seen = 0  # a closure pass (SAM) counts for nothing
        _scaler_skip(run, kw.get("optimizer"))
        if run.vetoed is not None:
            _undo_schedule(s, kw.get("lr_scheduler"), run.vetoed)
            run.vetoed = None
        run.session.after_update()  # the update counter (not after a veto), STEP
        if s.should_stop:
            control.should_training_stop = True

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        run = self._need()
        run.session.epoch_end(run.state.metrics)

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        self._need().session.checkpoint()
        from pathlib import Path

        from trickbag._files import write_atomically

        sd = self.state_dict()
        write_atomically(Path(folder) / STATE_FILE.format(rank=args.process_index), lambda f: torch.save(sd, f))

    def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._need().session.fit_end()
        if self._audit is not None:
            self._audit.__exit__(None, None, None)
            self._audit = None

    # ------------------------------------------------------------------ the loss (compute_loss_func)
    def compute_loss(self, outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        """HF's ``compute_loss_func``: the tricks' loss over the counted labels, weighted by their share of the
        update's ``num_items_in_batch`` (see the module's docstring)."""
        run = self._need()
        out, target, n = counted(_logits(outputs), labels, getattr(self, "shift_labels", False))
        if not run.state.model.training:  # evaluation: the task's own loss (no trick, no guard, nothing counted)
            loss = run.session.eval_loss(out, target)
            return loss if num_items_in_batch is None else loss * (n / num_items_in_batch)
        loss = run.session.plain_loss(out, target)  # the tricks' loss, LOSS, the guard's watch
        run.losses_seen += 1
        return loss if num_items_in_batch is None else loss * (n / num_items_in_batch)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The session's state (plug-ins, guard, counters) and the number of processes that wrote it (each writes its
        own file); HF keeps the RNG in its own checkpoint files."""
        return {**self._need().session.state_dict(), "world_size": runtime.dist_info().world_size}

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        run = self._need()
        sd = dict(sd)
        if "counters" not in sd:  # written before the HF adapter ran on the session
            sd["counters"] = {"step": sd["step"], "skipped_steps": sd["skipped_steps"], "epoch": run.state.epoch}
        if sd.get("world_size") == runtime.dist_info().world_size:
            # every process reads the file it wrote: its tricks' generators are its own, taken as they are (a plug-in
            # otherwise forks a rank's stream from the saved one, which is rank 0's in trickbag's own checkpoints)
            own = {p.key for p in run.plugins if isinstance(p, GeneratorState)}
            sd["plugins"] = {k: {**v, "this_rank": True} if k in own else v for k, v in sd["plugins"].items()}
        run.session.load_state_dict(sd, rng=False)  # HF restores the RNG from its rng_state files


def _keep_hf_no_decay(tricks: dict[str, Any], section: Any, weight_decay: float) -> dict[str, Any]:
    """layer_decay rebuilds the optimizer's groups; HF's own groups keep biases and LayerNorm weights out of weight
    decay, which the rebuilt groups keep too (``param_groups.no_decay_bias_norm``), said in one line."""
    if not (section.layer_decay.enabled and weight_decay > 0) or section.param_groups.enabled:
        return tricks
    print("trickbag: tricks.layer_decay rebuilds HF's parameter groups; biases and norm weights keep HF's weight "
          "decay 0 (tricks.param_groups.no_decay_bias_norm)", file=sys.stderr)
    return {**tricks, "param_groups": {"no_decay_bias_norm": True}}


def _scaler_skip(run: _Run, optimizer: Any) -> None:
    """fp16: an update the GradScaler skipped (inf gradients of the first pass), or whose SAM second pass overflowed
    (SAM put the weights back; accelerate's ``update`` saw finite first-pass gradients, so the scale backs off here,
    as trickbag's Trainer backs it off): counted as skipped, not as an update."""
    s = run.state
    if run.scale is None:
        return
    if run.overflow:
        s.scaler.update(new_scale=run.scale * s.scaler.get_backoff_factor())
    if (run.overflow or getattr(optimizer, "step_was_skipped", False)) and not s.step_skipped:
        s.step_skipped = True
        s.skipped_steps += 1
    run.scale, run.overflow = None, False


def _schedule_position(s: State, scheduler: Any) -> Any:
    """A vetoed update: HF steps the optimizer (the gradients are gone: nothing moves) and its schedule anyway, so
    the schedule's position is kept to be put back after HF steps it."""
    return (scheduler.state_dict() if scheduler is not None else None, s.lrs())


def _undo_schedule(s: State, scheduler: Any, saved: Any) -> None:
    sd, lrs = saved
    if scheduler is not None and sd is not None:
        scheduler.load_state_dict(sd)
    for g, lr in zip(s.optimizer.param_groups, lrs, strict=True):
        g["lr"] = lr


def _split(inputs: Mapping[str, Any]) -> tuple[Any, Any]:
    """Where an HF batch dict's inputs (:data:`INPUT_KEYS`) and ``labels`` are, for the batch tricks."""
    key = next((k for k in INPUT_KEYS if k in inputs), None)
    if key is None or "labels" not in inputs:
        raise RecipeError(f"a batch trick needs the inputs under one of {INPUT_KEYS} and 'labels'; the batch "
                          f"has {sorted(inputs)}")
    return (inputs[key], inputs["labels"]), lambda new: {**inputs, key: new[0], "labels": new[1]}


def _num_outputs(trainer: Any) -> int:
    """The width of the model's logits, from one forward on the first training sample (RNG put back)."""
    if _is_causal(trainer.model):
        return int(trainer.model.config.vocab_size)
    try:
        return _probe_outputs(trainer)
    except Exception:  # noqa: BLE001 (a probe: a model or dataset it cannot feed leaves the count unknown)
        return 0  # the tricks that need it (mix) say so in one line


def _probe_outputs(trainer: Any) -> int:
    batch = trainer.data_collator([trainer.train_dataset[0]])
    batch = {k: v.to(trainer.args.device) if hasattr(v, "to") else v for k, v in batch.items() if k != "labels"}
    rng, was = runtime.get_rng_state(), trainer.model.training
    try:
        with torch.no_grad():
            out = trainer.model.eval()(**batch)
    finally:
        trainer.model.train(was)
        runtime.set_rng_state(rng)
    return int(_logits(out).shape[-1])


def _is_causal(model: Any) -> bool:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return type(model).__name__ in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()


class TricksTrainer(Trainer):
    """``transformers.Trainer`` with trickbag's tricks: the hooks HF lacks, driven by the :class:`TricksCallback`
    in ``callbacks=``. Everything else is HF's own: model, data, optimizer class, schedule, precision, DDP."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        found = [c for c in self.callback_handler.callbacks if isinstance(c, TricksCallback)]
        if len(found) != 1:
            raise RecipeError(f"TricksTrainer needs exactly one TricksCallback in callbacks=, got {len(found)}")
        self.tricks = found[0]
        self.tricks.shift_labels = _is_causal(self.model)  # type: ignore[attr-defined]

    def create_optimizer(self, model: Any = None) -> Any:
        fresh = self.optimizer is None
        optimizer = super().create_optimizer(model) if model is not None else super().create_optimizer()
        if fresh:
            self.tricks.set_up(self)
            run = self.tricks.run
            assert run is not None
            if run.changes_loss:
                self.compute_loss_func = self.tricks.compute_loss
                self.label_smoother = None
            if getattr(run.state.optimizer, "takes_closure", False):
                self._closure_step(run.state.optimizer)
            return self.optimizer
        return optimizer

    def _closure_step(self, opt: Any) -> None:
        """SAM: HF calls ``optimizer.step()`` with no closure (under fp16 through the GradScaler's ``step``, which
        calls it only when the first pass's gradients are finite); the step is given the closure that runs the
        update's micro-batches again (a vetoed or overflowed second pass leaves the update as a skipped one)."""
        from trickbag.train.stepping import Overflow, VetoedUpdate

        self._group: list[Any] = []
        self._group_step = -1  # HF's global step the kept micro-batches belong to
        own_step = type(opt).step

        def step(closure: Any = None) -> Any:
            group, self._group = self._group, []
            run = self.tricks._need()
            if run.state.step_skipped:  # the first pass was vetoed (the guard): no second pass, as trickbag's Trainer
                return None
            try:
                return own_step(opt, closure or self._closure(group))
            except (VetoedUpdate, Overflow) as exc:
                opt.zero_grad(set_to_none=True)
                run.vetoed = _schedule_position(run.state, self.lr_scheduler)
                run.overflow = isinstance(exc, Overflow)
                return None

        opt.step = step

    def _closure(self, group: list[Any]) -> Any:
        """Forward + backward over the update's micro-batches again (HF's own training_step, no batch tricks:
        they ran already), then AFTER_BACKWARD, the guard and clipping on the gradients the update uses."""
        import contextlib

        from trickbag.train.stepping import VetoedUpdate, unscale_second_pass

        cb = self.tricks
        run = cb._need()

        def closure() -> torch.Tensor:
            s = run.state
            s.closure_pass = True
            try:
                total = torch.zeros((), device=self.args.device)
                for j, (model, inputs, n) in enumerate(group):
                    quiet = j < len(group) - 1 and self.args.world_size > 1
                    with self.accelerator.no_sync(model) if quiet else contextlib.nullcontext():
                        total = total + Trainer.training_step(self, model, inputs, n)
                unscale_second_pass(s.optimizer, s.scaler)  # fp16: by hand, checked
                # a first pass vetoed already, or this one is: AFTER_BACKWARD, the guard, clipping otherwise
                if s.step_skipped or run.session.before_update(exact=False):
                    raise VetoedUpdate
                return total
            finally:
                s.closure_pass = False

        return closure

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        cb = self.tricks
        if cb.schedule is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        from trickbag.train.parts import build_schedule

        run = cb._need()
        recipe = SimpleNamespace(schedule=cb.schedule, optim=SimpleNamespace(name="sgd"),  # not schedule-free
                                 train=SimpleNamespace(epochs=run.state.max_epochs))
        # over HF's own count of updates (max_steps, fractional epochs, drop_last), warm-up in HF's epochs
        self.lr_scheduler = build_schedule(recipe, run.state.optimizer, run.updates, [], "min",  # type: ignore[arg-type]
                                           total_steps=num_training_steps)
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def training_step(self, model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        run = self.tricks._need()
        if run.session.handles(Event.BATCH_START):
            inputs = run.session.batch_start(self._prepare_inputs(inputs), run.state.batch_idx, split=_split)
        elif self.tricks.guard is not None:
            self.tricks.guard.before_batch()
        if getattr(run.state.optimizer, "takes_closure", False):  # SAM: the closure runs these again
            if self._group_step != self.state.global_step:  # a new update (the last may have been skipped unstepped)
                self._group, self._group_step = [], self.state.global_step
            self._group.append((model, inputs, num_items_in_batch))
        return super().training_step(model, inputs, num_items_in_batch)

    def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False, num_items_in_batch: Any = None
                     ) -> Any:
        out = super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
        guard = self.tricks.guard
        if guard is not None and model.training and self.compute_loss_func != self.tricks.compute_loss:
            guard.watch_loss(out[0] if return_outputs else out)  # the model's own loss (a loss trick's is watched)
        return out

    def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        if self.tricks.run is None:
            return super().evaluate(*args, **kwargs)
        model = cast(torch.nn.Module, self.model)
        was = model.training
        session = self.tricks.run.session
        session.eval_start()
        metrics: dict[str, float] | None = None
        try:
            metrics = super().evaluate(*args, **kwargs)
        finally:
            session.eval_end(metrics if metrics is not None else session.state.eval_metrics)
            model.train(was)
        return metrics

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, STATE_FILE.format(rank=self.args.process_index))
        if not os.path.isfile(path):
            raise RecipeError(f"{checkpoint} holds no trickbag state ({os.path.basename(path)}): it was not written "
                              "by a TricksTrainer with these tricks")
        self.tricks.load_state_dict(torch.load(path, map_location="cpu", weights_only=False))
