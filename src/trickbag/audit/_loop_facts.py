"""Facts about training loops that several rules read (is an event run per micro-batch, does a helper only
clip or zero, is accumulation run by a framework): helpers that name no rule."""

from __future__ import annotations

import ast
from typing import cast

from trickbag.audit._ast import dotted
from trickbag.audit._flow import (
    BACKWARD,
    CALL,
    SCALE,
    SCALER_UPDATE,
    SCHED,
    STEP,
    UNSCALE,
    Event,
)

__all__: list[str] = []



def _managed(ev: Event) -> bool:
    """``ev`` is in a loop whose accumulation a framework runs (``accelerator.accumulate``)."""
    return any((acc := ev.fm.accumulation(lp)) is not None and acc.managed for lp in ev.loops)


def _micro(ev: Event, depth: int = 0) -> bool:
    """Is ``ev`` run once per micro-batch of a gradient-accumulation loop?  Also for an event of a local
    helper (outside any loop or accumulation test of the helper) that a micro-batch calls, following
    helpers of helpers two levels up: ``self.micro_step(x, y)`` with ``zero_grad()`` inside."""
    for lp in ev.loops:
        acc = ev.fm.accumulation(lp)
        if acc is not None and acc.is_micro(ev):
            return True
    if ev.loops or depth >= 2 or any(g.accum for g in ev.guards) or ev.fm.node is ev.fm.file.tree:
        return False
    return any(_micro(site, depth + 1) for site in ev.fm.call_sites())


#: the work of a training step besides clipping and zeroing
_STEP_WORK = {BACKWARD, STEP, SCALE, SCALER_UPDATE, UNSCALE, SCHED}


def _pure_call(e: Event, kind: str) -> bool:
    """A call of a local helper that does ``kind`` (clipping, zeroing) and none of the rest of a step
    (``clip(model, 1.0)``, ``self._reset()``): checked, and reported, where it is called."""
    return e.kind == CALL and kind in e.kinds() and not e.kinds() & _STEP_WORK


def _helper_name(e: Event) -> str:
    return dotted(cast(ast.Call, e.node).func) or e.extra["helper"].name
