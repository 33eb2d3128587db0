"""TB122 divided-but-not-accumulated: The loss is divided by the accumulation count, but the optimizer steps on
every micro-batch.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import dotted, walk
from trickbag.audit._flow import BACKWARD, STEP, FileModel, FunctionModel, Loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: a divisor that counts the micro-batches of one update
_ACCUM = re.compile(r"accum|grad_acc|gradient_acc|update_freq|acc_steps|accumulat", re.IGNORECASE)


def _accum_divisor(node: ast.AST) -> str | None:
    """``x / gradient_accumulation_steps`` or ``x /= args.accum_iter``: the divisor's name, else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        name = dotted(node.right)
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Div):
        name = dotted(node.value)
    else:
        return None
    return name if name and _ACCUM.search(name.split(".")[-1]) else None


def _divided_loss(fm: FunctionModel, loop: Loop, backward_line: int) -> str | None:
    """The accumulation divisor applied to a loss in ``loop`` before line ``backward_line``."""
    for n in walk(loop.node):
        if getattr(n, "lineno", backward_line) <= backward_line and (name := _accum_divisor(n)):
            return name
    return None


@rule("TB122", "divided-but-not-accumulated",
      fix="step (and zero the gradients) once every k micro-batches: if (i + 1) % k == 0: optimizer.step(); "
          "optimizer.zero_grad()")
def divided_but_not_accumulated(file: FileModel) -> Iterator[Hit]:
    """The loss is divided by the accumulation count, but the optimizer steps on every micro-batch.

    Dividing each micro-batch's loss by ``k`` is one half of gradient accumulation: the gradients of ``k``
    micro-batches add up to the gradient of their mean.  The other half is stepping once per ``k`` micro-batches.
    When the loop divides by ``k`` and then runs ``backward()``, ``step()`` and ``zero_grad()`` every iteration,
    each update uses one micro-batch's gradient shrunk ``k`` times: the effective learning rate is divided by
    ``k``, the effective batch is not enlarged, and a schedule counted in updates runs ``k`` times too fast.

    Reported at the ``optimizer.step()`` of a loop whose loss is divided by a name that counts accumulation
    (``gradient_accumulation_steps``, ``accum_iter``, ``update_freq``) before its ``backward()``, when the step
    runs on every iteration of that loop (no ``if`` around it inside the loop, no accumulation the linter
    recognises: a counter test, ``accelerator.accumulate``, an inner loop of micro-batches).

    Wrong::

        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / gradient_accumulation_steps
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

    Right::

        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / gradient_accumulation_steps
            loss.backward()
            if (step + 1) % gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    for fm in file.functions:
        for loop in fm.loops:
            steps = [e for e in loop.events if e.kind == STEP and e.loop is loop and not e.rel_guards(loop)]
            backs = [e for e in loop.events if e.kind == BACKWARD and e.loop is loop]
            if not steps or not backs or any(lp is not loop and loop in _parents(lp) for lp in fm.loops
                                             if any(BACKWARD in e.kinds() for e in lp.events)):
                continue
            if fm.accumulation(loop) is not None or any(fm.accumulation(p) is not None for p in _parents(loop)):
                continue
            back_line, step_line = getattr(backs[0].node, "lineno", 0), getattr(steps[0].node, "lineno", 0)
            divisor = _divided_loss(fm, loop, back_line)
            if divisor and step_line > back_line:
                yield Hit(steps[0].node, f"the loss is divided by {divisor} (gradient accumulation) but "
                                         f"{steps[0].recv or 'the optimizer'}.step() runs on every micro-batch: each "
                                         f"update sees one micro-batch's gradient, {divisor} times too small")


def _parents(loop: Loop) -> list[Loop]:
    out, p = [], loop.parent
    while p is not None:
        out.append(p)
        p = p.parent
    return out
