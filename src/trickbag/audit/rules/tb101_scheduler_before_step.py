"""TB101 scheduler-before-step: The LR scheduler is stepped before the optimizer in the same loop iteration.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from typing import cast

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, name_tokens, walk
from trickbag.audit._defs import constructed_class, sets_value_ahead
from trickbag.audit._flow import (
    BACKWARD,
    SCHED,
    STEP,
    Event,
    FileModel,
)
from trickbag.audit._loop_facts import per_micro_batch
from trickbag.audit._project import torch_pinned_below
from trickbag.audit._query import at_level, loops_of, stepish
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _counter_guarded(ev: Event, loop) -> bool:
    """``if epoch > 0: scheduler.step()`` at the top of a loop runs after the previous iteration; so does the
    ``else`` of ``if epoch == 0: ... elif epoch == 1: ...`` (GDumb's hand-made warm-up epochs, then the scheduler)."""
    for g in ev.rel_guards(loop):
        later = (ast.Gt, ast.GtE, ast.NotEq) if g.branch else (ast.Lt, ast.LtE, ast.Eq)
        for n in walk(g.node.test):
            if isinstance(n, ast.Compare) and any(isinstance(o, later) for o in n.ops):
                if {dotted(x) for x in [n.left, *n.comparators]} & loop.targets:
                    return True
    return False


@rule("TB101", "scheduler-before-step",
      fix="call scheduler.step() after optimizer.step() (per-epoch schedulers: after the epoch's training)")
def scheduler_before_step(file: FileModel) -> Iterator[Hit]:
    """The LR scheduler is stepped before the optimizer in the same loop iteration.

    Since PyTorch 1.1 ``scheduler.step()`` belongs after ``optimizer.step()``.  Stepping it first
    skips the first value of the schedule (the warm-up starts one step late, a per-epoch decay
    happens one epoch early) and PyTorch warns about it.  A cheat-sheet classic: ``scheduler.step()``
    as the first line of the epoch loop, before the epoch is trained.  A step function without a
    loop of its own counts as one iteration (Lightning's manual optimisation:
    ``self.manual_backward(loss); sch.step(); opt.step()`` in ``training_step``).  A handler run at the start of
    an epoch or iteration (ignite's ``@trainer.on(Events.EPOCH_STARTED)``, an ``on_epoch_start`` hook) that steps
    the scheduler runs before that epoch's updates, in a file that steps an optimizer.  So does an epoch function
    (its batch loop back-propagates and steps) that steps the scheduler at its own top, before that loop, and a
    loop-less update helper (``self.optimizer_scheduler.step()`` called after the training step's backward) that
    steps the scheduler before the optimizer.

    In a project that pins a torch older than 1.1 (``torch==0.4.1``) stepping the scheduler first was the documented
    order: low confidence there, and so is a file written for torch <= 0.3 (``Variable(x, volatile=True)``,
    ``.cuda(async=True)``, ``loss.data[0]``).  Not torch's schedulers are left alone: an instance of a hand-written
    schedule class of the project (no base class but ``object``, built in the file or returned by a project factory
    such as ``init_opt(...)``) whose ``step()`` writes the value for the coming update is meant to run before it
    (I-JEPA's ``WarmupCosineSchedule``), and so is a ``step()`` whose return value is used (``lr = sched.step()``:
    torch's returns None).  A step given a count as its position (``scheduler.step(epoch=num_batches)``, or the count
    offset by a constant, ``step(epoch - 1)``) sets the value itself, whatever the order, unless the count was
    incremented earlier in the same pass (one ahead: the first value is skipped as by a bare ``step()`` there); a
    step that cannot run on the first pass (``if epoch > 0:``, or the ``else`` of ``if epoch == 0: ... elif epoch ==
    1: ...`` hand-made warm-up epochs) follows the earlier passes' updates.

    Wrong::

        for epoch in range(epochs):
            scheduler.step()
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()

    Right::

        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            scheduler.step()
    """
    if not any(fm.kind_events(SCHED) for fm in file.functions):
        return
    old = torch_pinned_below(file.path, (1, 1))
    old_code = not old and _pre_04_code(file)
    for hit in _hits(file):
        if old or old_code:
            hit = dataclasses.replace(hit, confidence="low", message=hit.message + (_PRE_11 if old else _PRE_04))
        yield hit


_PRE_11 = (" (uncertain: the project pins a torch older than 1.1, where the scheduler was stepped before the epoch's "
           "updates)")
_PRE_04 = (" (uncertain: the file is written for torch <= 0.3 (Variable(volatile=...), .cuda(async=...), "
           "loss.data[0]), where the scheduler was stepped before the epoch's updates)")
_PRE_04_CODE = re.compile(r"\bvolatile\s*=|\.cuda\(\s*async\s*=|\.data\[0\]")


def _pre_04_code(file: FileModel) -> bool:
    """Code written for torch <= 0.3: ``Variable(x, volatile=True)``, ``.cuda(async=True)`` or ``loss.data[0]``
    (removed or an error from torch 0.4 / Python 3.7 on)."""
    return bool(file.memo("pre_04", lambda: any(_PRE_04_CODE.search(ast.unparse(n)) for n in file.tree.body)))


def _hits(file: FileModel) -> Iterator[Hit]:
    for _fm, loop in loops_of(file):
        for e in loop.events:
            if e.kind != SCHED or _positioned(e) or not at_level(e, loop) or per_micro_batch(e) \
                    or _counter_guarded(e, loop):
                continue
            if _before_its_step(file, e, loop.events) and not _sets_value_ahead(file, e):
                yield Hit(e.node, f"{e.recv}.step() runs before the optimizer step of the same iteration")
    for fm in file.functions:
        yield from _scheduler_first_in_step_function(file, fm)
        yield from _scheduler_first_in_epoch_function(file, fm)
    yield from _scheduler_in_start_handler(file)


def _positioned(e: Event) -> bool:
    """``scheduler.step(epoch)`` / ``step(epoch=num_batches)``: the position is a count set explicitly, whatever the
    order, unless it was incremented earlier in the same pass (``self.updates += 1; sched.step(epoch=self.updates)``
    before ``optimizer.step()``: one ahead, the first value skipped as by a bare ``step()`` there)."""
    call = cast(ast.Call, e.node)
    if not (call.args or call.keywords):
        return False
    arg = call.args[0] if call.args else call.keywords[0].value
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, (ast.Add, ast.Sub)) and isinstance(arg.right, ast.Constant):
        arg = arg.left  # ``step(epoch - 1)`` with epochs from 1: a position set explicitly, offset by a constant
    pos = dotted(arg)
    if not pos:
        return False  # ``step(epoch=i / n)`` and other computed values: judged as a plain step
    return not any(pos in a.names and isinstance(a.op, ast.Add) and a.order < e.order and a.loops == e.loops
                   for a in e.fm.assigns)


def _scheduler_first_in_epoch_function(file: FileModel, fm) -> Iterator[Hit]:
    """An epoch function (its batch loop back-propagates and steps the optimizer) that steps the scheduler first, at
    its own top level, before that loop: every call runs the scheduler before the epoch's updates."""
    loops = [lp for lp in fm.loops if lp.parent is None]
    train = [lp for lp in loops if any(BACKWARD in e.kinds() for e in lp.events) and any(stepish(e) for e in lp.events)]
    if len(loops) != 1 or not train:
        return
    start = train[0].node.lineno
    for e in fm.events:
        if e.kind != SCHED or e.loops or e.guards or _positioned(e) or e.node.lineno >= start:
            continue
        steps = [s for s in train[0].events if stepish(s)]
        own = _scheduler_optimizer(file, e.recv or "")
        if own and not any(s.kind == STEP and s.recv == own for s in steps):
            continue
        if not _sets_value_ahead(file, e) and not _stepped_later(fm, e):
            yield Hit(e.node, f"{e.recv}.step() runs at the start of the epoch function, before the optimizer steps "
                              f"of its batch loop")


def _update_helper(fm, flat: list[Event]) -> bool:
    """A helper without a loop that steps the optimizer, called by the file's training step after its backward
    (``loss.backward(); self.optimizer_scheduler.step()``): its body is the update of that step."""
    if fm.loops or not any(e.kind == STEP for e in flat):
        return False
    if any(any(b.order < site.order for b in site.fm.events if BACKWARD in b.kinds()) for site in fm.call_sites()):
        return True
    if fm.cls is None:
        return False
    made = {dotted(t) for n in fm.file.nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and call_name(n.value) == fm.cls.name for t in n.targets}  # ``self.opt_sched = OptimizerScheduler(...)``
    return any(e.recv in made and call_name(e.node) == fm.name
               and any(b.order < e.order for b in g.events if BACKWARD in b.kinds())
               for g in fm.file.functions for e in g.events if isinstance(e.node, ast.Call))


def _stepped_later(fm, e: Event) -> bool:
    return any(x.kind == SCHED and x.recv == e.recv and x.order > e.order for x in fm.events)


_START_EVENT = re.compile(r"^(EPOCH|ITERATION)_STARTED$")
_START_HOOK = re.compile(r"^on_(train_)?(epoch|batch|iteration|step)_(start|begin)$")


def _scheduler_in_start_handler(file: FileModel) -> Iterator[Hit]:
    """A handler run at the start of an epoch or iteration (ignite's ``@trainer.on(Events.EPOCH_STARTED)`` or
    ``add_event_handler(Events.EPOCH_STARTED, fn)``, an ``on_epoch_start`` / ``on_train_batch_begin`` hook) that
    steps the scheduler, in a file whose training steps an optimizer: it runs before that epoch's updates."""
    if not any(stepish(e) for fm in file.functions for e in fm.events):
        return
    registered = {dotted(n.args[1]) for n in file.nodes if isinstance(n, ast.Call)
                  and call_name(n) == "add_event_handler" and len(n.args) > 1
                  and _START_EVENT.match((dotted(n.args[0]) or "").split(".")[-1])}
    for fm in file.functions:
        decorators = getattr(fm.node, "decorator_list", [])
        starts = fm.name in registered or _START_HOOK.match(fm.name) or any(
            isinstance(d, ast.Call) and call_name(d) == "on" and d.args
            and _START_EVENT.match((dotted(d.args[0]) or "").split(".")[-1]) for d in decorators)
        if not starts:
            continue
        for e in fm.kind_events(SCHED):
            if not _positioned(e) and not e.loops and not _after_first_guarded(e):
                yield Hit(e.node, f"{e.recv}.step() runs in a handler at the start of the epoch or iteration, before "
                                  f"its optimizer steps")


def _before_its_step(file: FileModel, e: Event, events: list[Event]) -> bool:
    """Does the scheduler step ``e`` run before every step (of its optimizer) among ``events``?"""
    steps = [s for s in events if stepish(s) and not s.exclusive(e)]
    own = _scheduler_optimizer(file, e.recv or "")
    if own and any(s.kind == STEP and s.recv == own for s in steps):
        steps = [s for s in steps if s.kind == STEP and s.recv == own]
    return bool(steps) and all(s.order > e.order for s in steps)


def _scheduler_first_in_step_function(file: FileModel, fm) -> Iterator[Hit]:
    """A step function without a loop of its own (Lightning's manual optimisation in ``training_step``:
    ``self.manual_backward(loss); sch.step(); opt.step()``): its body is one iteration."""
    flat = [e for e in fm.events if not e.loops]
    if not any(BACKWARD in e.kinds() for e in flat) and not _update_helper(fm, flat):
        return
    for e in flat:
        if e.kind != SCHED or _positioned(e) or per_micro_batch(e) or _after_first_guarded(e):
            continue
        if _before_its_step(file, e, flat) and not _sets_value_ahead(file, e):
            yield Hit(e.node, f"{e.recv}.step() runs before the optimizer step of the same training step")


def _sets_value_ahead(file: FileModel, e: Event) -> bool:
    """The scheduler is not one of torch's: its ``step()`` returns the value it sets (``lr = sched.step()``; torch's
    returns None), or it is an instance of a hand-written schedule class of the project (no torch base) whose
    ``step()`` writes the value for the coming update (I-JEPA's ``WarmupCosineSchedule``): stepped before the
    update on purpose."""
    if any(isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is e.node for n in e.fm.nodes):
        return True
    if not e.recv:
        return False
    cls = file.memo(f"sched_class:{e.recv}", lambda: constructed_class(file.tree, file.path, e.recv or ""))
    return cls is not None and sets_value_ahead(cls)


def _after_first_guarded(ev: Event) -> bool:
    """``if batch_idx > 0: sch.step()`` (or ``!= 0``): stepped for the previous step, on purpose."""
    return any(isinstance(n, ast.Compare) and any(isinstance(o, (ast.Gt, ast.GtE, ast.NotEq)) for o in n.ops)
               for g in ev.guards for n in walk(g.node.test))


_SCHED_WORDS = {"sched", "scheduler", "lr", "schedule", "warmup"}
_OPT_WORDS = {"opt", "optim", "optimizer", "optimiser"}


def _scheduler_optimizer(file: FileModel, sched: str) -> str | None:
    """The optimizer a scheduler drives: from its constructor (``LambdaLR(opt_g, ...)``), or from the
    names (``sched_g`` goes with ``opt_g``)."""
    built = file.memo("scheduler_optimizers", lambda: _find_scheduler_optimizers(file))
    if sched in built:
        return built[sched]
    suffix = set(name_tokens(sched.split(".")[-1])) - _SCHED_WORDS
    if not suffix:
        return None
    steps = {e.recv for fm in file.functions for e in fm.kind_events(STEP) if e.recv}
    matches = [o for o in steps if set(name_tokens(o.split(".")[-1])) - _OPT_WORDS == suffix]
    return matches[0] if len(matches) == 1 else None


def _find_scheduler_optimizers(file: FileModel) -> dict[str, str]:
    out: dict[str, str] = {}
    for fm in file.functions:
        for a in fm.assigns:
            if a.op is None and len(a.names) == 1 and isinstance(a.value, ast.Call) and \
                    R.role_by_constructor(a.value, file.imports, file.class_names) == R.SCHEDULER:
                first = a.value.args[0] if a.value.args else next(
                    (k.value for k in a.value.keywords if k.arg == "optimizer"), None)
                if name := dotted(first):
                    out[a.names[0]] = name
    return out
