"""TB103 zero-grad-misplaced: ``zero_grad()`` erases gradients that the next optimizer step needs.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._flow import (
    BACKWARD,
    STEP,
    ZERO,
    Event,
    FileModel,
)
from trickbag.audit._loop_facts import _STEP_WORK, _helper_name, _managed, _micro, _pure_call
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _pure_helper(fm) -> bool:
    """A local helper called from the file that does none of the rest of a step (see :func:`_pure_call`)."""
    return bool(fm.call_sites()) and not fm.file.summary(fm).kinds & _STEP_WORK


def _zero_between(fm, s: Event) -> Iterator[Event]:
    backs = [b for b in fm.events if b.kind == BACKWARD and b.order < s.order and not b.exclusive(s)
             and b.loops[:len(s.loops)] == s.loops]
    if not backs:
        return
    b = backs[-1]
    opts = {x.recv for x in fm.kind_events(STEP)}
    for z in fm.kind_events(ZERO):
        if not (b.order < z.order < s.order) or z.exclusive(s) or z.exclusive(b) or z.loops != s.loops:
            continue
        if z.recv == s.recv or z.recv is None or (fm.role(z.recv) == R.MODEL and len(opts) == 1):
            yield z


@rule("TB103", "zero-grad-misplaced",
      fix="zero the gradients after optimizer.step() (in the update branch), never between backward and step")
def zero_grad_misplaced(file: FileModel) -> Iterator[Hit]:
    """``zero_grad()`` erases gradients that the next optimizer step needs.

    Inside a gradient-accumulation loop, ``optimizer.zero_grad()`` on every micro-batch throws away
    the micro-batches accumulated so far: the update sees only the last one (the "accumulation"
    does nothing but lower the learning rate).  Between ``backward()`` and ``step()`` it zeroes the
    gradients the step was about to use.  In a loop without accumulation, zeroing at the top of the
    iteration is correct.

    A local helper that only zeroes the gradients (``self._reset()`` setting ``p.grad = None`` in a loop over
    the parameters) counts where it is called, and is reported at that call when it runs on every micro-batch.

    Wrong::

        for i, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()

    Right::

        for i, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y) / accum
            loss.backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    for fm in file.functions:
        for z in fm.events:
            if z.kind == ZERO and not _pure_helper(fm) and not _managed(z) \
                    and (_micro(z) or _step_fn_accumulates(fm, z)):
                yield Hit(z.node, "zero_grad() on every micro-batch discards the gradients being accumulated")
            elif _pure_call(z, ZERO) and _micro(z) and not _managed(z):
                yield Hit(z.node, f"{_helper_name(z)}() zeroes the gradients on every micro-batch: it discards "
                                  f"the gradients being accumulated")
        for s in fm.kind_events(STEP):
            for z in _zero_between(fm, s):
                yield Hit(z.node, "zero_grad() between backward() and step() zeroes the gradients the step uses")


def _step_fn_accumulates(fm, z: Event) -> bool:
    """A per-batch step function (no loop of its own) that zeroes, runs the backward, then steps only under an
    accumulation test on one of its parameters: ``if (idx + 1) % self.accum == 0: opt.step()``."""
    if z.loops or any(g.accum for g in z.guards) or fm.node is fm.file.tree:
        return False
    params = {a.arg for a in fm.node.args.posonlyargs + fm.node.args.args + fm.node.args.kwonlyargs}
    steps = [s for s in fm.kind_events(STEP) if not s.loops and s.order > z.order]
    backs = [b for b in fm.kind_events(BACKWARD) if not b.loops and z.order < b.order
             and not any(g.accum for g in b.guards)]
    if not steps or not backs:
        return False

    def on_param(s: Event) -> bool:
        return any(g.accum and {n.id for n in ast.walk(g.node.test) if isinstance(n, ast.Name)} & params
                   for g in s.guards)
    return all(on_param(s) for s in steps)
