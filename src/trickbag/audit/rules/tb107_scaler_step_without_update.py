"""TB107 scaler-step-without-update: ``scaler.step(optimizer)`` is called but ``scaler.update()`` never is.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._flow import (
    CALL,
    SCALER_UPDATE,
    STEP,
    Event,
    FileModel,
)
from trickbag.audit._query import train_loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _other_object(e: Event, name: str, names: set[str]) -> bool:
    """``e`` acts directly on another object than ``name``, one of ``names`` or both made by their own
    constructor: ``scalerD.update()`` does not update ``scalerG`` (a helper's call, or an alias, may)."""
    if e.kind == CALL or e.recv is None or e.recv == name:
        return False
    return e.recv in names or (_constructed(e.fm, e.recv) and _constructed(e.fm, name))


def _constructed(fm, name: str) -> bool:
    """``name = GradScaler()`` (or any object constructor) in this function or an enclosing one."""
    scope = fm
    while scope is not None:
        if name in scope.roles:
            return scope.roles[name] != R.NOT_AN_OBJECT
        scope = scope.parent
    return False


@rule("TB107", "scaler-step-without-update", fix="call scaler.update() once after every scaler.step(optimizer)")
def scaler_step_without_update(file: FileModel) -> Iterator[Hit]:
    """``scaler.step(optimizer)`` is called but ``scaler.update()`` never is.

    The loss scale only adapts in ``update()``: without it the scale never grows back after an
    overflow and never shrinks on one — every step with inf/NaN gradients is skipped forever.

    Each scaler counts on its own: with two (``scaler_d``, ``scaler_g``), updating one does not update the
    other.

    Wrong::

        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)

    Right::

        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """
    for fm in file.functions:
        scalers = {s.extra["scaler"] for s in fm.kind_events(STEP) if s.extra.get("scaler")}
        for s in fm.kind_events(STEP):
            if not s.extra.get("scaler"):
                continue
            loop = train_loop(s)
            updates = [u for u in fm.events if SCALER_UPDATE in u.kinds() and (loop is None or loop in u.loops)
                       and not _other_object(u, s.extra["scaler"], scalers)]
            if not updates:
                yield Hit(s.node, f"{s.extra['scaler']}.step() without {s.extra['scaler']}.update(): "
                                  f"the loss scale never adapts")
