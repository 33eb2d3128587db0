"""``trickbag.audit.audit``: watch a hand-written training loop while it runs and report, at the user's
line, what the static rules can only guess (scheduler steps per optimizer step, clipping on scaled
gradients, gradients never zeroed, training in eval mode, evaluation with grad, parameters missing
from the optimizer, EMA updates per micro-batch).

It wraps ``optimizer.step``/``zero_grad``, ``GradScaler.scale``/``unscale_``/``step``/``update``,
``scheduler.step``, ``torch.nn.utils.clip_grad_norm_``/``clip_grad_value_`` and EMA updates, and
hooks the model's forward and one parameter's gradient per optimizer; every wrapper calls the
original with the same arguments and every hook returns None, so the numbers do not change.
Everything is restored when the ``with`` block ends.

>>> import torch
>>> from torch import nn
>>> from trickbag.audit import audit
>>> model = nn.Linear(3, 1)
>>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
>>> with audit(model, opt, report=False) as report:
...     for _ in range(3):
...         model(torch.ones(2, 3)).sum().backward()   # no zero_grad: gradients pile up
...         opt.step()
>>> [(f.rule, f.count) for f in report.findings]
[('grads-never-zeroed', 2)]
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

import torch

from trickbag.audit import _patches
from trickbag.audit._where import user_where
from trickbag.audit.registry import code_of

__all__ = ["audit", "Audit", "AuditReport", "AuditFinding", "AUDIT_RULES", "StopScript", "user_where"]

#: rule name -> what it means (printed by ``trickbag audit --list`` and in docs/lint.md)
AUDIT_RULES = {
    "scheduler-before-step": "scheduler.step() called before the first optimizer.step()",
    "scheduler-per-micro-batch": "scheduler.step() called more than once between two optimizer steps",
    "scheduler-on-skipped-step": "scheduler.step() after the GradScaler skipped the optimizer step (inf/NaN grads)",
    "scheduler-unit-mismatch": "a per-iteration schedule (OneCycleLR, CyclicLR, a warm-up counted in steps) "
                               "stepped far less often than the optimizer (once per epoch)",
    "clip-before-unscale": "gradients clipped while still multiplied by the GradScaler's scale",
    "clip-per-micro-batch": "the same parameters clipped more than once between two optimizer steps",
    "clip-after-step": "gradients clipped after the optimizer step that used them, with no backward since",
    "grads-never-zeroed": "optimizer.step() on gradients accumulated since the previous step (no zero_grad)",
    "zero-grad-before-step": "zero_grad() between backward() and step(): the gradients of the step are erased",
    "train-in-eval-mode": "backward through a forward run in eval mode (dropout off, BatchNorm frozen)",
    "eval-with-grad": "eval-mode forward with gradients enabled that no backward goes through (no "
                      "no_grad/inference_mode)",
    "param-not-in-optimizer": "trainable parameters of the model that no audited optimizer updates",
    "frozen-param-decayed": "frozen parameters in an optimizer group with weight decay (moved when they keep a .grad)",
    "ema-per-micro-batch": "EMA/SWA updated more than once between two optimizer steps",
    "ema-before-step": "EMA/SWA updated after backward() but before the optimizer step",
}

#: a finding that explains another one at the same line: only the more specific one is reported
#: (a scheduler stepped every micro-batch also runs before the first optimizer step)
SUPERSEDES = {"scheduler-per-micro-batch": "scheduler-before-step", "ema-per-micro-batch": "ema-before-step"}


class StopScript(BaseException):
    """Raised at the step after the last one ``trickbag audit --steps N`` lets a script run."""


@dataclass
class AuditFinding:
    """One runtime finding: the ``rule``, a ``message``, ``where`` (``file:line``), how often; ``code`` is
    the rule's code, shared with ``trickbag lint`` (``grads-never-zeroed`` is TB104 in both)."""

    rule: str
    message: str
    where: str
    count: int = 1

    @property
    def code(self) -> str:
        return code_of(self.rule)

    def __str__(self) -> str:
        return f"{self.where}: {self.code} {self.rule} {self.message}"


@dataclass
class AuditReport:
    """What :func:`audit` saw: ``findings`` (one per rule and place) and event ``counts``."""

    findings: list[AuditFinding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("optimizer steps", "skipped steps", "zero_grad", "forwards", "backwards", "scheduler steps", "clips",
         "EMA updates"), 0))

    def add(self, rule: str, message: str, where: str) -> None:
        """Count ``rule`` at ``where``; of two rules where one explains the other (:data:`SUPERSEDES`),
        one line keeps only the more specific, with the count of both."""
        weaker, stronger = SUPERSEDES.get(rule), next((k for k, v in SUPERSEDES.items() if v == rule), None)
        for f in self.findings:
            if f.where != where:
                continue
            if f.rule == rule or f.rule == stronger:
                f.count += 1
                return
            if f.rule == weaker:
                f.rule, f.message, f.count = rule, message, f.count + 1
                return
        self.findings.append(AuditFinding(rule, message, where))

    def table(self) -> str:
        """The short table printed when the audit ends."""
        seen = ", ".join(f"{k} {v}" for k, v in self.counts.items() if v or k == "optimizer steps")
        head = f"trickbag audit: {len(self.findings) or 'no'} finding{'s' * (len(self.findings) != 1)} ({seen})"
        if not self.findings:
            return head
        w_rule = max(len("rule"), *(len(f.rule) for f in self.findings))
        w_where = max(len("where"), *(len(f.where) for f in self.findings))
        lines = [head, f"  code   {'rule':<{w_rule}}  count  {'where':<{w_where}}  message"]
        for f in self.findings:
            lines.append(f"  {f.code}  {f.rule:<{w_rule}}  {f.count:<5}  {f.where:<{w_where}}  {f.message}")
        return "\n".join(lines)


@dataclass(eq=False)
class _OptState:
    """What the audit tracks per optimizer."""

    opt: torch.optim.Optimizer
    steps: int = 0
    zeroed: bool = False  # zero_grad() called since the last step
    zero_seen: bool = False  # a backward found the sample gradient empty since the last step
    stale_seen: bool = False  # a backward found the sample gradient still full since the last step
    skipped: bool = False  # the GradScaler skipped the last step
    stepped: bool = False  # stepped, and no backward since (its gradients were used)
    attached: bool = False
    hook: Any = None
    sample: torch.Tensor | None = None
    step_wrapper: Any = None  # the audit's wrapper of ``opt.step``


_STEP_CELLS = ("num_training_steps", "num_warmup_steps", "warmup_steps", "total_steps", "max_steps",
               "warmup_iters", "total_iters", "max_iters", "num_steps")


def _counted_in_steps(name: str) -> bool:
    """A name of a number of steps or iterations (``warmup_steps``, ``max_iter``, ``WARMUP_ITERS``), not of
    epochs."""
    low = name.lower()
    return "epoch" not in low and any(w in low for w in ("step", "iter")) and low not in ("step", "steps", "iter")


def _per_iteration(sched: Any) -> bool:
    """The schedule is meant to advance every iteration: OneCycleLR / CyclicLR (documented so), or a LambdaLR
    whose function reads a number of steps: closes over one (``num_warmup_steps``, ``num_training_steps`` ...),
    reads one as an attribute or a global (``cfg.warmup_steps``, ``WARMUP_ITERS``) or gets one from a
    ``functools.partial``; a SequentialLR / ChainedScheduler when one of its parts is."""
    if isinstance(sched, (torch.optim.lr_scheduler.OneCycleLR, torch.optim.lr_scheduler.CyclicLR)):
        return True
    if any(_per_iteration(s) for s in getattr(sched, "_schedulers", []) or []):
        return True
    for fn in getattr(sched, "lr_lambdas", []) or []:
        code = getattr(fn, "__code__", None)
        inner = getattr(fn, "func", None)  # functools.partial(lr_lambda, num_warmup_steps=...)
        names = set(code.co_freevars) | set(code.co_names) if code is not None else set()
        names |= set(getattr(fn, "keywords", {}) or {})
        if inner is not None and getattr(inner, "__code__", None) is not None:
            names |= set(inner.__code__.co_varnames) | set(inner.__code__.co_names)
        if names & set(_STEP_CELLS) or any(_counted_in_steps(n) for n in names):
            return True
    return False


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


class Audit:
    """The context manager behind :func:`audit` (``with Audit(...) as report:``)."""

    def __init__(self, model: Any = None, optimizer: Any = None, *, scaler: Any = None, scheduler: Any = None,
                 ema: Any = None, report: bool = True, file: TextIO | None = None,
                 stop_after: int | None = None, adopt: bool = False) -> None:
        self.models = _as_list(model)
        for m in self.models:
            if not isinstance(m, torch.nn.Module):
                raise TypeError(f"audit: model must be an nn.Module (or a list of them), got {type(m).__name__}")
        self.optimizers = _as_list(optimizer)
        for o in self.optimizers:
            if not isinstance(o, torch.optim.Optimizer):
                raise TypeError(f"audit: optimizer must be a torch.optim.Optimizer, got {type(o).__name__}")
        self.schedulers, self.emas, self.scaler = _as_list(scheduler), _as_list(ema), scaler
        self.report = AuditReport()
        self._print, self._file, self._stop_after, self._adopt = report, file, stop_after, adopt
        self._undo: list[Callable[[], None]] = []
        self._active = False
        self._opt: dict[int, _OptState] = {}
        self._model_params: list[tuple[str, torch.nn.Parameter]] = []
        self._attached_models: set[int] = set()
        self._pending_backward = False
        self.eval_forwards: dict[str, int] = {}
        self._scaled = self._unscaled = False
        self._scaler_enabled = True
        self._clips: dict[int, int] = {}
        self._sched_since: dict[int, int] = {}
        self._ema_since: dict[int, int] = {}
        self._depth = 0
        self._top_modules: dict[int, torch.nn.Module] = {}
        self._sched_opt: dict[int, int] = {}
        self._sched_seen: dict[int, tuple[Any, str, int, int]] = {}  # id -> (scheduler, where, calls, first step)
        self._in_step = 0  # > 0 while an optimizer's step() runs (an LBFGS closure calls back into the loop)
        self._erased_in_step: str | None = None  # a zero_grad inside step() after a backward, no backward since

    # ------------------------------------------------------------------ enter / exit
    def __enter__(self) -> AuditReport:
        self._active = True
        try:
            for m in self.models:
                self._attach_model(m)
            for o in self.optimizers:
                self._attach_optimizer(self._adopt_optimizer(o))
            _patches.install(self)
        except BaseException:
            self._restore()
            raise
        return self.report

    def __exit__(self, *exc: Any) -> Literal[False]:
        self._resolve_eval_forwards()
        self._check_schedule_units()
        self._restore()
        if self._print:
            print(self.report.table(), file=self._file or sys.stderr)
        return False

    def _restore(self) -> None:
        self._active = False
        while self._undo:
            self._undo.pop()()

    def patch(self, owner: Any, name: str, new: Any) -> None:
        """Set ``owner.name = new`` until the audit ends (then the previous value comes back, unless
        someone replaced ``new`` meanwhile: the wrappers are inert once the audit is over)."""
        had = name in vars(owner)
        old = vars(owner).get(name)
        setattr(owner, name, new)

        def undo() -> None:
            if vars(owner).get(name) is new:
                if had:
                    setattr(owner, name, old)
                else:
                    delattr(owner, name)

        self._undo.append(undo)

    def finding(self, rule: str, message: str, where: str | None = None) -> None:
        self.report.add(rule, message, where or user_where())

    # ------------------------------------------------------------------ models
    def _attach_model(self, model: torch.nn.Module) -> None:
        if id(model) in self._attached_models:
            return
        self._attached_models.add(id(model))
        prefix = f"{type(model).__name__}." if len(self._attached_models) > 1 else ""
        self._model_params += [(prefix + n, p) for n, p in model.named_parameters()]
        handle = model.register_forward_pre_hook(self._forward_pre)
        self._undo.append(handle.remove)
        self._wrap_method(model, "zero_grad", lambda orig, a, kw: self._zero_grad(
            [s for s in self._opt.values() if s.attached], orig, a, kw))

    def _forward_pre(self, module: torch.nn.Module, args: Any) -> None:
        if not self._active:
            return None
        self.report.counts["forwards"] += 1
        if self.eval_forwards:  # the previous eval-mode forward got no backward before this one
            self._resolve_eval_forwards()
        if not module.training and torch.is_grad_enabled():
            self.eval_forwards[user_where()] = 1
        return None

    def _resolve_eval_forwards(self) -> None:
        for where in self.eval_forwards:
            self.report.add("eval-with-grad", "forward in eval mode with gradients enabled, and no backward went "
                            "through it before the next forward: run evaluation under torch.inference_mode()", where)
        self.eval_forwards.clear()

    # ------------------------------------------------------------------ optimizers
    def _adopt_optimizer(self, opt: torch.optim.Optimizer) -> _OptState:
        if id(opt) in self._opt:
            return self._opt[id(opt)]
        st = self._opt[id(opt)] = _OptState(opt)
        st.step_wrapper = self._wrap_method(opt, "step", lambda orig, a, kw: self._step(st, orig, a, kw))
        self._wrap_method(opt, "zero_grad", lambda orig, a, kw: self._zero_grad([st], orig, a, kw))
        return st

    def _wrap_method(self, obj: Any, name: str, body: Callable[[Callable, tuple, dict], Any]) -> Any:
        orig = getattr(obj, name)
        audit = self

        @functools.wraps(getattr(orig, "__func__", orig))
        def wrapper(_self: Any, *args: Any, **kwargs: Any) -> Any:
            if not audit._active:
                return orig(*args, **kwargs)
            return body(orig, args, kwargs)

        bound = types.MethodType(wrapper, obj)
        self.patch(obj, name, bound)
        return bound

    def _attach_optimizer(self, st: _OptState) -> None:
        st.attached = True
        params = [p for g in st.opt.param_groups for p in g["params"] if p.requires_grad]
        if params:
            st.sample = params[-1]
            st.hook = st.sample.register_hook(functools.partial(self._grad_hook, st))
            self._undo.append(st.hook.remove)

    def _step(self, st: _OptState, orig: Callable, args: tuple, kwargs: dict) -> Any:
        if not st.attached:
            self._attach_on_first_step(st)
        where = None
        if st.steps and st.stale_seen and not st.zeroed and not st.zero_seen:
            where = user_where()
            self.finding("grads-never-zeroed", "optimizer.step() on gradients accumulated since the previous "
                         "step: call optimizer.zero_grad() once per update", where)
        self._resolve_eval_forwards()
        self._check_params(st, where)
        if self._stop_after is not None and self.report.counts["optimizer steps"] >= self._stop_after:
            raise StopScript()
        self._in_step += 1  # what a closure does inside step() is part of the step, not of the loop
        try:
            out = orig(*args, **kwargs)
        finally:
            self._in_step -= 1
        if self._erased_in_step is not None:  # Lightning's closure: zero_grad after its backward, then the update
            self.finding("zero-grad-before-step", "zero_grad() after backward() and before the update: the "
                         "gradients of this update are erased", self._erased_in_step)
            self._erased_in_step = None
        if where is None and st.steps and st.stale_seen and not st.zeroed and not st.zero_seen:
            # the backward ran in a closure inside step() (Lightning's automatic optimization)
            self.finding("grads-never-zeroed", "optimizer.step() on gradients accumulated since the previous "
                         "step: call optimizer.zero_grad() once per update")
        self._after_step(st)
        return out

    def _after_step(self, st: _OptState) -> None:
        st.steps += 1
        self.report.counts["optimizer steps"] += 1
        st.zeroed = st.zero_seen = st.stale_seen = st.skipped = False
        st.stepped = True
        self._pending_backward = False
        self._clips.clear()
        self._ema_since.clear()
        for key in [k for k, opt_id in self._sched_opt.items() if opt_id == id(st.opt)]:
            self._sched_since[key] = 0
        self._depth = 0

    def _zero_grad(self, states: Iterable[_OptState], orig: Callable, args: tuple, kwargs: dict) -> Any:
        self.report.counts["zero_grad"] += 1
        if self._pending_backward and not self._in_step:
            self.finding("zero-grad-before-step", "zero_grad() after backward() and before step(): the "
                         "gradients of this update are erased")
            self._pending_backward = False
        elif self._pending_backward:  # inside step(): an error only if no backward follows before the update
            self._erased_in_step = user_where()
        for st in states:
            st.zeroed = True
        # an eval-mode forward stays pending: a backward may still go through it (Lightning's closure runs
        # forward, zero_grad, backward); the next forward or step settles it
        return orig(*args, **kwargs)

    def _grad_hook(self, st: _OptState, grad: torch.Tensor) -> None:
        if not self._active:
            return None
        self._pending_backward = True
        self._erased_in_step = None
        st.stepped = False
        self.report.counts["backwards"] += 1
        if st.steps and not st.zeroed and not st.zero_seen and not st.stale_seen:
            g = st.sample.grad if st.sample is not None else None
            if g is None or not bool(g.any()):
                st.zero_seen = True
            else:
                st.stale_seen = True
        if self.eval_forwards:
            for where in self.eval_forwards:
                self.report.add("train-in-eval-mode", "backward through a forward run in eval mode: call "
                                "model.train() before training", where)
            self.eval_forwards.clear()
        return None

    def _attach_on_first_step(self, st: _OptState) -> None:
        """Script mode: the first step of an optimizer attaches it and the models that own its parameters."""
        ids = {id(p) for g in st.opt.param_groups for p in g["params"]}
        for module in list(self._top_modules.values()):
            if any(id(p) in ids for p in module.parameters()):
                self._attach_model(module)
        self._attach_optimizer(st)
        _patches.stop_module_discovery(self)

    # ------------------------------------------------------------------ parameter coverage
    def _check_params(self, st: _OptState, where: str | None) -> None:
        groups = {id(p): g for o in self._opt.values() if o.attached for g in o.opt.param_groups for p in g["params"]}
        missing: list[str] = []
        moving: list[str] = []
        parked: list[str] = []
        for name, p in self._model_params:
            g = groups.get(id(p))
            if g is None and p.requires_grad:
                missing.append(name)
            elif g is not None and not p.requires_grad and g.get("weight_decay", 0):
                (moving if p.grad is not None else parked).append(name)
            elif g is not None and not p.requires_grad and p.grad is not None and g.get("momentum", 0):
                moving.append(name)
        where = where or user_where()  # the optimizer.step() line, in-process and for `trickbag audit` alike
        if missing:
            self.finding("param-not-in-optimizer", f"{len(missing)} trainable parameter(s) are in no optimizer and "
                         f"never change: {_names(missing)}", where)
        if moving:
            self.finding("frozen-param-decayed", f"frozen parameter(s) {_names(moving)} still have a .grad in a group "
                         "with weight decay/momentum: the optimizer keeps moving them", where)
        elif parked:
            self.finding("frozen-param-decayed", f"frozen parameter(s) {_names(parked)} sit in an optimizer group with "
                         "weight decay: skipped while their .grad is None, decayed as soon as one appears "
                         "(zero_grad(set_to_none=False)); build the optimizer from trainable parameters", where)

    # ------------------------------------------------------------------ scheduler, scaler, clipping, EMA
    def _opt_of(self, sched: Any) -> _OptState | None:
        """The audited optimizer a scheduler steps, through wrappers that keep it as ``.optimizer`` (accelerate's
        AcceleratedOptimizer, which the HF Trainer's schedule is built on)."""
        opt = getattr(sched, "optimizer", None)
        for _ in range(4):
            if opt is None or id(opt) in self._opt:
                break
            opt = getattr(opt, "optimizer", None)
        return self._opt.get(id(opt)) if opt is not None else None

    def on_scheduler_step(self, sched: Any) -> None:
        self.report.counts["scheduler steps"] += 1
        st = self._opt_of(sched)
        if st is None:
            return
        self._sched_opt[id(sched)] = id(st.opt)
        since = self._sched_since.get(id(sched), 0)
        if st.skipped:
            self.finding("scheduler-on-skipped-step", "scheduler.step() after the GradScaler skipped the optimizer "
                         "step (inf/NaN gradients): the schedule advanced without an update", user_where())
        elif since >= 1:
            self.finding("scheduler-per-micro-batch", "scheduler.step() called again with no optimizer step since "
                         "the last one: the schedule runs faster than the updates", user_where())
        elif st.steps == 0:
            self.finding("scheduler-before-step", "scheduler.step() before the first optimizer.step(): the first "
                         "value of the schedule is skipped", user_where())
        self._sched_since[id(sched)] = since + 1
        seen = self._sched_seen.get(id(sched))
        self._sched_seen[id(sched)] = (sched, user_where(), (seen[2] if seen else 0) + 1, st.steps if seen is None
                                       else seen[3])

    def _check_schedule_units(self) -> None:
        """A schedule counted in iterations (OneCycleLR, CyclicLR, a LambdaLR whose function reads a number of
        steps) stepped at most once per 4 optimizer steps over at least 8 of them: stepped per epoch."""
        for sched, where, n, first in self._sched_seen.values():
            st = self._opt_of(sched)
            if st is None:
                continue
            span = st.steps - first
            if span >= 8 and n * 4 <= span + 1 and _per_iteration(sched):
                self.finding("scheduler-unit-mismatch", f"{type(sched).__name__} is counted in iterations but was "
                             f"stepped {n} times over {span} optimizer steps (once per epoch?): step it after every "
                             "optimizer step", where)

    def on_scaler_scale(self, scaler: Any) -> None:
        # a disabled scaler (GradScaler(enabled=use_amp)) scales nothing now, but the same loop runs
        # with it enabled on a GPU: the order is checked either way, the message says which
        self._scaled = True
        self._scaler_enabled = scaler.is_enabled()

    def on_scaler_unscale(self) -> None:
        self._unscaled = True

    def on_scaler_update(self) -> None:
        self._scaled = self._unscaled = False

    def on_scaler_step(self, optimizer: Any, run: Callable[[], Any]) -> Any:
        st = self._opt.get(id(optimizer))
        before = st.steps if st is not None else None
        with self._step_watched(st):
            out = run()
        self._pending_backward = False
        if st is not None and st.steps == before:
            st.skipped = True
            self.report.counts["skipped steps"] += 1
            for key in [k for k, opt_id in self._sched_opt.items() if opt_id == id(st.opt)]:
                self._sched_since[key] = 0
            self._clips.clear()  # the update is over (skipped): the next one's clip and EMA update are its own
            self._ema_since.clear()
        return out

    @contextlib.contextmanager
    def _step_watched(self, st: _OptState | None) -> Iterator[None]:
        """The step the GradScaler is about to call goes through the audit's watch. accelerate's fp16 step puts its
        own ``optimizer.step`` in place for that call (a wrapper of the method it captured when it prepared the
        optimizer, before an audit that began later) and afterwards sets that captured method back: the audit's
        wrapper is put around whatever step is in place, for this call."""
        if st is None or vars(st.opt).get("step") is st.step_wrapper:
            yield
            return
        opt, had = st.opt, "step" in vars(st.opt)
        current = opt.step

        def step(*args: Any, **kwargs: Any) -> Any:
            return self._step(st, current, args, kwargs) if self._active else current(*args, **kwargs)

        opt.step = step  # type: ignore[method-assign]
        try:
            yield
        finally:
            if vars(opt).get("step") is step:
                if had:
                    opt.step = current  # type: ignore[method-assign]
                else:
                    del opt.step

    def on_clip(self, parameters: Any) -> None:
        self.report.counts["clips"] += 1
        if self._scaled and not self._unscaled:
            why = ("gradients clipped while still multiplied by the loss scale" if self._scaler_enabled else
                   "gradients clipped before scaler.unscale_(optimizer): harmless while this GradScaler is "
                   "disabled, but with it enabled (fp16) the clip sees scaled gradients")
            self.finding("clip-before-unscale", f"{why}: call scaler.unscale_(optimizer) first", user_where())
        if self._in_step:
            return  # clipping inside an LBFGS closure: once per evaluation of the closure, by design
        first = parameters if isinstance(parameters, torch.Tensor) else (parameters[0] if parameters else None)
        if any(st.stepped and any(p is first for g in st.opt.param_groups for p in g["params"])
               for st in self._opt.values()):
            self.finding("clip-after-step", "gradients clipped after the optimizer step that used them (no "
                         "backward since): clip between backward() and step()", user_where())
        key = id(first)
        self._clips[key] = self._clips.get(key, 0) + 1
        if self._clips[key] > 1:
            self.finding("clip-per-micro-batch", "the same gradients clipped again with no optimizer step in "
                         "between: clip once per update", user_where())

    def on_ema_update(self, ema: Any) -> None:
        self.report.counts["EMA updates"] += 1
        n = self._ema_since[id(ema)] = self._ema_since.get(id(ema), 0) + 1
        if n > 1:
            self.finding("ema-per-micro-batch", "EMA/SWA updated again with no optimizer step in between: update "
                         "it once per optimizer step", user_where())
        elif self._pending_backward:
            self.finding("ema-before-step", "EMA/SWA updated after backward() but before optimizer.step(): it "
                         "lags one update", user_where())


def audit(model: Any, optimizer: Any, *, scaler: Any = None, scheduler: Any = None, ema: Any = None,
          report: bool = True, file: TextIO | None = None) -> Audit:
    """Watch a hand-written training loop: ``with audit(model, optimizer) as report: ...``.

    ``model``/``optimizer`` may be lists (a GAN); ``scaler``, ``scheduler`` (one or a list) and
    ``ema`` are found automatically when not given (any ``GradScaler``, LR scheduler of an audited
    optimizer, ``trickbag.EMA``/``SWA`` or ``AveragedModel`` used inside the block).  The report's
    ``findings`` carry ``rule``, ``message`` and ``where`` (the user's ``file:line``); the table is
    printed to ``file`` (stderr) when the block ends unless ``report=False``.
    """
    return Audit(model, optimizer, scaler=scaler, scheduler=scheduler, ema=ema, report=report, file=file)
