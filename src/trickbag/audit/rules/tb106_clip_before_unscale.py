"""TB106 clip-before-unscale: Gradients are clipped while a GradScaler is in use, without ``scaler.unscale_()`` first.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import re
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import dotted
from trickbag.audit._flow import (
    CALL,
    CLIP,
    SCALE,
    SCALER_UPDATE,
    STEP,
    UNSCALE,
    Event,
    FileModel,
)
from trickbag.audit._loop_facts import helper_name, pure_call
from trickbag.audit._query import train_loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



_SELF_UNSCALING = re.compile(r"accelerator|fabric|trainer|engine")


def _unscales_itself(c: Event) -> bool:
    """``accelerator.clip_grad_norm_(...)`` / ``fabric.clip_gradients(...)`` unscale the gradients before clipping."""
    return c.kind == CLIP and bool(c.recv) and bool(_SELF_UNSCALING.search((c.recv or "").split(".")[-1].lower()))


def _scaler_in_use(fm, c: Event) -> bool:
    """A scaler scales or steps on the clip's path, and the clip is not in the branch without one (``else`` of
    ``if scaler is not None``, ``if not scaler``)."""
    if any(not branch and fm.role(dotted(test)) == R.SCALER for test, branch in (g.normalised() for g in c.guards)):
        return False
    loop = train_loop(c)
    for e in fm.events:
        if e.exclusive(c) or (loop is not None and loop not in e.loops):
            continue
        if e.kinds() & {SCALE, SCALER_UPDATE} or (e.kind == STEP and e.extra.get("scaler")):
            return True
    return False


@rule("TB106", "clip-before-unscale",
      fix="call scaler.unscale_(optimizer) right before clipping")
def clip_before_unscale(file: FileModel) -> Iterator[Hit]:
    """Gradients are clipped while a GradScaler is in use, without ``scaler.unscale_()`` first.

    Under ``GradScaler`` the gradients are multiplied by the loss scale (65536 at the start).
    Clipping them to a max norm of 1.0 before ``unscale_`` clips the *scaled* norm: the true
    gradient is cut to about 1/65536 of the intended norm, and the threshold changes whenever
    the scale does.  The finding is static and advisory: lint cannot know whether the scaler is
    enabled.  With ``GradScaler(enabled=False)`` (or ``enabled=use_amp`` on a run without AMP) the
    scale is 1, so the clip is harmless in that run and the runtime audit, which sees the real
    scale, reports nothing; the order is still wrong the day the scaler is switched on.

    Clipping done by a local helper (``clip(model, 1.0)`` whose body calls ``clip_grad_norm_``) counts where the
    helper is called, and is reported at that call.  The scaling may happen in helpers and in methods of other
    objects of the file (an AMP engine's ``backward_loss``, a precision plug-in's ``optimizer_step``).  A clip in
    the branch without a scaler (``else`` of ``if scaler is not None``) is not reported.

    Wrong::

        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()

    Right::

        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    """
    for fm in file.functions:
        for c in fm.events:
            if not (c.kind == CLIP or pure_call(c, CLIP)) or not _scaler_in_use(fm, c) or _unscales_itself(c):
                continue
            loop = train_loop(c)
            unscaled = [u for u in fm.events if UNSCALE in u.kinds() and u.order < c.order and not u.exclusive(c)
                        and (loop is None or loop in u.loops)]
            if not unscaled:
                where = f" (in {helper_name(c)}())" if c.kind == CALL else ""
                yield Hit(c.node, f"gradients are clipped{where} while still multiplied by the GradScaler's loss "
                                  f"scale")
