"""Facts about training loops that several rules read (is an event run per micro-batch, does a helper only
clip or zero, is accumulation run by a framework, which events run on every micro-batch): helpers that name no
rule."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import cast

from trickbag.audit._ast import dotted, names_in, walk_no_defs
from trickbag.audit._flow import (
    BACKWARD,
    CALL,
    SCALE,
    SCALER_UPDATE,
    SCHED,
    STEP,
    UNSCALE,
    Event,
    FileModel,
    FunctionModel,
    backward_like,
    steps_like,
)

__all__: list[str] = []


def framework_accumulates(ev: Event) -> bool:
    """``ev`` is in a loop whose accumulation a framework runs (``accelerator.accumulate``)."""
    return any((acc := ev.fm.accumulation(lp)) is not None and acc.managed for lp in ev.loops)


def per_micro_batch(ev: Event, depth: int = 0) -> bool:
    """Is ``ev`` run once per micro-batch of a gradient-accumulation loop?  Also for an event of a per-batch step
    function outside its update test (see :func:`step_function`), and for an event of a local helper (outside any
    loop or accumulation test of the helper) that a micro-batch calls, following helpers of helpers two levels
    up: ``self.micro_step(x, y)`` with ``zero_grad()`` inside."""
    for lp in ev.loops:
        acc = ev.fm.accumulation(lp)
        if acc is not None and acc.is_micro(ev) \
                and not any(g.branch and _first_call_only(g.node) for g in ev.rel_guards(lp)):
            return True  # (``if i == 0: opt.zero_grad()`` in the loop runs once, before the first micro-batch)
    if ev.loops or any(g.accum for g in ev.guards) or ev.fm.node is ev.fm.file.tree:
        return False
    if any(_first_call_only(g.node) for g in ev.guards):
        return False  # ``if iteration == 0: optimizer.zero_grad()``: once, at the start, not per micro-batch
    if any(_epoch_test(g.node) for g in ev.guards):
        return False  # ``if self.old_epoch != epoch: sched.step()``: once per epoch, not per micro-batch
    if not steps_like(ev) and step_function(ev.fm):
        return True
    return depth < 2 and any(per_micro_batch(site, depth + 1) for site in ev.fm.call_sites())


def _epoch_test(node: ast.AST) -> bool:
    """``if self.old_epoch != epoch:`` / ``if epoch != last_epoch:``: a test of the epoch changing."""
    test = getattr(node, "test", None)
    if test is None:
        return False
    return any(isinstance(n, ast.Compare) and any(isinstance(o, ast.NotEq) for o in n.ops)
               and any("epoch" in (dotted(x) or "").lower() for x in [n.left, *n.comparators])
               for n in walk_no_defs(test))


def _first_call_only(node: ast.AST) -> bool:
    """``if it == 0:`` / ``if 0 == it:`` (an equality with 0, no modulo): the branch runs on one call."""
    test = getattr(node, "test", None)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Constant) and x.value == 0 and not isinstance(x.value, bool) for x in sides) \
        and not any(isinstance(x, ast.BinOp) for x in sides)


def step_function(fm: FunctionModel) -> bool:
    """``fm`` is run once per micro-batch and steps every few calls: no loop of its own around its backward or
    step, a backward outside any accumulation test, and every optimizer step under an accumulation test of a count
    the function is given or keeps (a parameter, an attribute it increments, or a flag set from one of those):
    ``if (idx + 1) % self.accum == 0: opt.step()``, ``self.count += 1; do_step = self.count % k == 0``."""
    table = cast("dict[int, bool]", fm.file.memo("step_functions", dict))
    if id(fm) not in table:
        table[id(fm)] = _is_step_function(fm)
    return table[id(fm)]


def _is_step_function(fm: FunctionModel) -> bool:
    if fm.node is fm.file.tree:
        return False
    backs = [b for b in fm.events if backward_like(b) and not b.loops and not any(g.accum for g in b.guards)]
    steps = [s for s in fm.events if steps_like(s)]
    if not backs or not steps or any(s.loops for s in steps):
        return False
    counts = _counts(fm)
    return all(any(g.accum and names_in(g.node.test) & counts for g in s.guards) for s in steps)


def _counts(fm: FunctionModel) -> set[str]:
    """Names of the counts a function is given or keeps: its parameters, what it increments (``self.n += 1``),
    and the names it sets from those (``do_step = self.n % k == 0``)."""
    args = fm.node.args if isinstance(fm.node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    out = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {"self", "cls"} if args else set()
    out |= {n for a in fm.assigns if isinstance(a.op, ast.Add) and not a.is_append for n in a.names}
    out |= {n for a in fm.assigns if a.op is None and a.value is not None and names_in(a.value) & out for n in a.names}
    return out


#: the work of a training step besides clipping and zeroing
_STEP_WORK = {BACKWARD, STEP, SCALE, SCALER_UPDATE, UNSCALE, SCHED}


def pure_call(e: Event, kind: str) -> bool:
    """A call of a local helper that does ``kind`` (clipping, zeroing) and none of the rest of a step
    (``clip(model, 1.0)``, ``self._reset()``): checked, and reported, where it is called."""
    return e.kind == CALL and kind in e.kinds() and not e.kinds() & _STEP_WORK


def _pure_helper(fm: FunctionModel) -> bool:
    """A local helper called from the file that does none of the rest of a step (see :func:`pure_call`)."""
    return bool(fm.call_sites()) and not fm.file.summary(fm).kinds & _STEP_WORK


def helper_name(e: Event) -> str:
    return dotted(cast(ast.Call, e.node).func) or e.extra["helper"].name


def micro_batch_events(file: FileModel, kind: str) -> Iterator[Event]:
    """Every event of ``kind`` that runs once per micro-batch of gradient accumulation (see :func:`per_micro_batch`), in
    file order; a helper that does ``kind`` and nothing else of a step counts at its calls (see
    :func:`pure_call`), not inside.  Whether a framework runs the accumulation is
    :func:`framework_accumulates`'s to say."""
    for fm in file.functions:
        pure = None
        for e in fm.events:
            if e.kind == kind:
                if pure is None:
                    pure = _pure_helper(fm)
                if not pure and per_micro_batch(e):
                    yield e
            elif pure_call(e, kind) and per_micro_batch(e):
                yield e
