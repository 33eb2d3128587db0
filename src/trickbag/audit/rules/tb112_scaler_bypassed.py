"""TB112 scaler-bypassed: The GradScaler is used for half of the job only.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dotted
from trickbag.audit._flow import (
    BACKWARD,
    STEP,
    ZERO,
    Event,
    FileModel,
)
from trickbag.audit._query import train_loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _scaled_by_scaler(fm, expr, before: int, depth: int = 0) -> bool:
    if isinstance(expr, ast.Call) and call_name(expr) == "scale":
        return True
    name = dotted(expr)
    if name is None or depth > 3:
        return False
    return any(a.value is not None and _scaled_by_scaler(fm, a.value, a.order, depth + 1)
               for a in fm.last_assignments(name, before))


@rule("TB112", "scaler-bypassed", fix="with a GradScaler: scaler.scale(loss).backward(), then scaler.step(optimizer)")
def scaler_bypassed(file: FileModel) -> Iterator[Hit]:
    """The GradScaler is used for half of the job only.

    ``scaler.scale(loss).backward()`` followed by a plain ``optimizer.step()`` applies gradients
    that are still multiplied by the loss scale (65536x too large, and steps with inf gradients are
    not skipped).  A plain ``optimizer.step()`` after ``scaler.step(optimizer)`` on the same path steps it
    twice on the same gradients (the AMP and non-AMP updates merged by mistake); with that optimizer's
    ``zero_grad()`` and a new backward between the two (StyleGAN2's lazy regularisation pass), the plain step
    applies new gradients and is not reported.  A plain
    ``loss.backward()`` followed by ``scaler.step(optimizer)`` divides
    unscaled gradients by the scale: the model barely moves (``features.backward(scaler.scale(grad))``, a backward
    handed the scaled gradient, is scaled).

    A wrapper's step given the scaler (``self.optimizer.step('generator', scaler=scaler)``) steps through it.

    Wrong::

        scaler.scale(loss).backward()
        optimizer.step()
        scaler.update()

    Right::

        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    for fm in file.functions:
        backs = fm.kind_events(BACKWARD)
        for s in fm.kind_events(STEP):
            loop = train_loop(s)
            mine = [b for b in backs if b.order < s.order and not b.exclusive(s) and (loop is None or loop in b.loops)]
            scaled = [b for b in mine if _scaled_by_scaler(fm, b.extra.get("loss"), b.order)]
            twice = _scaler_stepped_before(fm, s, loop)
            if not s.extra.get("scaler") and twice is not None:
                yield Hit(s.node, f"{s.recv}.step() after {twice}.step({s.recv}) steps the optimizer a second time "
                                  f"on the same gradients")
            elif not s.extra.get("scaler") and scaled and not _scaler_step_near(fm, s, loop):
                yield Hit(s.node, f"{s.recv}.step() applies gradients still multiplied by the loss scale; "
                                  f"use scaler.step({s.recv})")
            elif s.extra.get("scaler") and mine and not scaled and not any(_scaled_gradient_argument(fm, b)
                                                                          for b in mine):
                yield Hit(mine[-1].node, "backward() of an unscaled loss, then scaler.step(): the step divides "
                                         "these gradients by the loss scale")


def _scaled_gradient_argument(fm, b: Event) -> bool:
    """``features.backward(scaler.scale(grad))``: the gradient handed to ``backward`` is the scaled one (a two-stage
    backward, partial-FC's), so the parameters' gradients are scaled as ``scaler.step`` expects."""
    call = b.node
    if not isinstance(call, ast.Call):
        return False
    grads = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "gradient")]
    return any(_scaled_by_scaler(fm, g, b.order) for g in grads)


def _scaler_stepped_before(fm, s: Event, loop) -> str | None:
    """The scaler whose ``scaler.step(opt)`` already ran before the plain ``opt.step()`` ``s`` on the same path
    (in the same iteration): the optimizer steps twice per update."""
    for x in fm.events:
        if x.kind == STEP and x.extra.get("scaler") and x.recv == s.recv and x.order < s.order \
                and not x.exclusive(s) and (loop is None or loop in x.loops) and not _fresh_gradients(fm, x, s):
            return x.extra["scaler"]
    return None


def _fresh_gradients(fm, first: Event, s: Event) -> bool:
    """Between the scaler's step ``first`` and the plain step ``s`` the optimizer's gradients were zeroed and a
    new backward ran: ``s`` applies new gradients (StyleGAN2's lazy regularisation pass: zero_grad, an unscaled
    penalty's backward, a plain step), not the same ones a second time."""
    between = [e for e in fm.events if first.order < e.order < s.order and not e.exclusive(s)]
    zero = next((e.order for e in between if e.kind == ZERO and e.recv in (s.recv, None)), None)
    return zero is not None and any(e.kind == BACKWARD and e.order > zero for e in between)


def _scaler_step_near(fm, s: Event, loop) -> bool:
    return any(x.kind == STEP and x.extra.get("scaler") and not x.exclusive(s) and (loop is None or loop in x.loops)
               and x.recv in (s.recv, None) for x in fm.events)
