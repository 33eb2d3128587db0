"""TB107 scaler-step-without-update: ``scaler.step(optimizer)`` is called but ``scaler.update()`` never is.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import names_in
from trickbag.audit._flow import (
    CALL,
    SCALER_UPDATE,
    STEP,
    UNSCALE,
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
    other.  An ``update()`` that runs only when the step is not skipped (``if grad_norm < limit: scaler.step(opt);
    scaler.update()``) after an unconditional ``scaler.unscale_(opt)`` leaves the scaler unreset on a skipped step:
    the next ``unscale_()`` raises.  Reported at the ``update()``; a condition on settings known before the unscale
    (``if args.fp16:``) is not that.

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
            if not s.extra.get("scaler") or s.extra.get("wrapper"):
                continue  # ``self.optimizer.step('g', scaler=scaler)``: the wrapper updates the scale it steps with
            loop = train_loop(s)
            updates = [u for u in fm.events if SCALER_UPDATE in u.kinds() and (loop is None or loop in u.loops)
                       and not _other_object(u, s.extra["scaler"], scalers)]
            if not updates:
                yield Hit(s.node, f"{s.extra['scaler']}.step() without {s.extra['scaler']}.update(): "
                                  f"the loss scale never adapts")
        yield from _update_skipped_after_unscale(fm)


def _update_skipped_after_unscale(fm) -> Iterator[Hit]:
    """``scaler.unscale_(opt)`` on every update, ``scaler.step(opt); scaler.update()`` only under a condition it
    is not under, on a value computed after the unscale (``if not skip_step:`` after a too-large gradient norm): on a
    skipped step nothing resets the scaler, and the next ``unscale_`` raises (it was already called since the last
    ``update()``).  Conditions on settings known before (``if args.fp16 and native_amp:``) are left alone."""
    for u in fm.kind_events(UNSCALE):
        loop = train_loop(u)
        if loop is None:
            continue
        updates = [x for x in fm.events if SCALER_UPDATE in x.kinds() and loop in x.loops and x.order > u.order]
        mine = {id(g.node) for g in u.rel_guards(loop)}
        later = {n for a in fm.assigns if a.order > u.order and loop in a.loops for n in a.names}
        if updates and all(any(names_in(g.node.test) & later for g in x.rel_guards(loop) if id(g.node) not in mine)
                           for x in updates) and not _both_branches(updates, mine, loop):
            x = updates[0]
            yield Hit(x.node, f"{x.recv or 'scaler'}.update() runs only under a condition that "
                              f"{u.recv or 'scaler'}.unscale_() (line {u.node.lineno}) is not under: after a skipped "
                              f"step the next unscale_() raises and the scale stops adapting")


def _both_branches(updates, mine: set[int], loop) -> bool:
    """An update in both branches of one ``if`` (``if ok: step; update`` ``else: update``)."""
    seen: dict[int, set[bool]] = {}
    for x in updates:
        for g in x.rel_guards(loop):
            if id(g.node) not in mine:
                seen.setdefault(id(g.node), set()).add(g.branch)
    return any(len(b) == 2 for b in seen.values())
