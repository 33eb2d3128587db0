"""TB411 scheduler-not-checkpointed: A resumable checkpoint keeps the optimizer's state but not the LR scheduler's.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, const_value, dict_entries, dotted, walk
from trickbag.audit._flow import SCHED, FileModel, FunctionModel, Loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []


def _last(name: str | None) -> str:
    return (name or "").split(".")[-1]


def _saved_values(fm: FunctionModel, arg: ast.AST, line: int) -> list[ast.expr]:
    """What the saved object holds: a dict literal's values, or those of the dict a name was built into in this
    function before ``line`` (``state = {...}``, ``state['scheduler'] = ...``, ``state.update(...)``), a later
    entry replacing an earlier one of the same key (``checkpoint['optimizer'] = []`` before a lighter save)."""
    direct = dict_entries(arg)
    if direct or isinstance(arg, ast.Dict):
        return [v for _, v in direct]
    name = dotted(arg)
    if name is None:
        return []
    entries: dict[object, ast.expr] = {}
    for n in sorted((n for n in fm.nodes if isinstance(n, (ast.Assign, ast.Call))
                     and getattr(n, "lineno", line) < line), key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(n, ast.Assign) and any(dotted(t) == name for t in n.targets):
            entries = dict(dict_entries(n.value)) or {n.value: n.value}
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Subscript) and dotted(t.value) == name:
                    key = const_value(t.slice)
                    entries[key if isinstance(t.slice, ast.Constant) else t.slice] = n.value
        elif isinstance(n, ast.Call) and call_name(n) == "update" and isinstance(n.func, ast.Attribute) \
                and dotted(n.func.value) == name:
            for a in n.args:
                entries.update(dict_entries(a) or [(a, a)])
            entries.update((k.arg or k, k.value) for k in n.keywords)
    return list(entries.values())


def _state_of(values: list[ast.expr], fm: FunctionModel, role: str) -> list[str]:
    """Names of objects of ``role`` whose ``state_dict()`` is among ``values``."""
    out = []
    for v in values:
        for c in walk(v):
            if isinstance(c, ast.Call) and call_name(c) == "state_dict" and isinstance(c.func, ast.Attribute):
                who = dotted(c.func.value)
                if who and fm.role(who) == role:
                    out.append(who)
    return out


#: a name that holds the position a resumed run starts from (``start_epoch``, ``cur_iter``, ``global_step``)
_POSITION = re.compile(r"(start|cur|curr|current|last|resume|resumed|begin|global|init|initial)_?(epoch|iter|step)",
                       re.IGNORECASE)


def _only_steps(lp: Loop) -> bool:
    """The loop's body does nothing but ``x.step()`` calls (schedulers moved forward, no training)."""
    body = getattr(lp.node, "body", [])
    return bool(body) and all(isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)
                              and call_name(st.value) == "step" for st in body)


def _caught_up(file: FileModel, scheduler: str) -> bool:
    """A loop that only steps the scheduler (``for _ in range(start_epoch * ipe): scheduler.step()``): the resume
    moves it to its position."""
    last = _last(scheduler)
    return any(e.kind == SCHED and _last(e.recv) == last and e.loop is not None and _only_steps(e.loop)
               for fm in file.functions for e in fm.events)


def _positioned_at_build(file: FileModel, scheduler: str) -> bool:
    """The scheduler is built from the resume position (``optimizer, scheduler = configure(args, model,
    cur_iter - 1)``, ``LambdaLR(opt, f, start_epoch - 1)``)."""
    last = _last(scheduler)
    for n in file.nodes:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(
                _last(dotted(t)) == last or (isinstance(t, ast.Tuple) and any(_last(dotted(x)) == last for x in t.elts))
                for t in n.targets):
            args = list(n.value.args) + [k.value for k in n.value.keywords]
            if any(_POSITION.search(dotted(x) or "") for a in args for x in walk(a)
                   if isinstance(x, (ast.Name, ast.Attribute))):
                return True
    return False


def _stepped_schedulers(file: FileModel) -> dict[str, ast.Call]:
    """Schedulers stepped without a position (``scheduler.step()``, ``step(val_loss)``): their state is their
    position.  ``step(epoch=...)`` / ``step(epoch)`` with a name that says epoch sets the position each time."""
    out: dict[str, ast.Call] = {}
    for fm in file.functions:
        for e in fm.events:
            if e.kind != SCHED or not e.recv or not isinstance(e.node, ast.Call):
                continue
            if any(k.arg == "epoch" for k in e.node.keywords) or any(
                    re.search(r"epoch|step|iter", dotted(x) or "", re.IGNORECASE)
                    for a in e.node.args for x in walk(a) if isinstance(x, (ast.Name, ast.Attribute))):
                continue
            out.setdefault(e.recv, e.node)
    return out


def _restored_elsewhere(file: FileModel, scheduler: str) -> bool:
    """The scheduler's position is set on resume some other way: ``scheduler.load_state_dict``, a ``last_epoch=``
    given to a scheduler, its ``state_dict()`` saved by another call, or its ``last_epoch`` assigned."""
    last = _last(scheduler)
    for n in file.nodes:
        if isinstance(n, ast.Call):
            name = call_name(n)
            recv = dotted(n.func.value) if isinstance(n.func, ast.Attribute) else None
            if name in ("load_state_dict", "state_dict") and _last(recv) == last:
                return True
            if any(k.arg in ("last_epoch", "last_step", "current_step", "start_step") for k in n.keywords):
                return True
        elif isinstance(n, ast.Attribute) and n.attr in ("last_epoch", "_step_count") \
                and _last(dotted(n.value)) == last and isinstance(n.ctx, ast.Store):
            return True
    return False


def _resumes_optimizer(file: FileModel) -> bool:
    """The file restores an optimizer's state (``optimizer.load_state_dict(ckpt['optimizer'])``): its
    checkpoints are meant to resume a training."""
    for fm in file.functions:
        for n in fm.nodes:
            if isinstance(n, ast.Call) and call_name(n) == "load_state_dict" and isinstance(n.func, ast.Attribute) \
                    and fm.role(dotted(n.func.value)) == R.OPTIMIZER:
                return True
    return False


@rule("TB411", "scheduler-not-checkpointed",
      fix="save scheduler.state_dict() beside the optimizer's and load it back on resume")
def scheduler_not_checkpointed(file: FileModel) -> Iterator[Hit]:
    """A resumable checkpoint keeps the optimizer's state but not the LR scheduler's.

    An LR scheduler stepped with ``scheduler.step()`` carries the schedule's position (``last_epoch``) in its
    own state; it is not in the optimizer's state_dict.  A checkpoint that saves the model and the optimizer for
    resuming, but not the scheduler, resumes at epoch N with a scheduler built anew at position 0: the warm-up
    runs again, a step or cosine decay starts over, and the resumed run trains at LRs the uninterrupted run never
    used — with nothing in the logs but a changed loss curve.

    Reported at the ``torch.save`` of a checkpoint that holds an optimizer's ``state_dict()`` and no scheduler
    state, in a file that steps an LR scheduler without a position argument (``scheduler.step()``; not
    ``step(epoch)``) and restores an optimizer's ``load_state_dict``.  Not reported when the file sets the
    scheduler's position another way: its ``load_state_dict``, a ``last_epoch=`` passed to a scheduler, its
    ``state_dict()`` saved by another call, ``scheduler.last_epoch = ...``, a loop that only steps the scheduler
    (``for _ in range(start_epoch * iters): scheduler.step()``), or a scheduler built with the resume position
    among its arguments (``start_epoch``, ``cur_iter``, ``global_step``).  An entry replaced before a save counts
    as replaced (``checkpoint["optimizer"] = []`` before a lighter copy is saved: that copy keeps no optimizer
    state).

    Wrong::

        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
        if args.resume:
            ckpt = torch.load(args.resume)
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            start_epoch = ckpt["epoch"] + 1
        for epoch in range(start_epoch, epochs):
            train_one_epoch(model, loader, optimizer)
            scheduler.step()
            torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)

    Right::

        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
        if args.resume:
            ckpt = torch.load(args.resume)
            model.load_state_dict(ckpt["model"])
            optimizer.load_state_dict(ckpt["optimizer"])
            scheduler.load_state_dict(ckpt["scheduler"])
            start_epoch = ckpt["epoch"] + 1
        for epoch in range(start_epoch, epochs):
            train_one_epoch(model, loader, optimizer)
            scheduler.step()
            torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict()}, path)
    """
    schedulers = _stepped_schedulers(file)
    if not schedulers or not _resumes_optimizer(file):
        return
    missing = [s for s in schedulers if not (_restored_elsewhere(file, s) or _caught_up(file, s)
                                             or _positioned_at_build(file, s))]
    if not missing:
        return
    for fm in file.functions:
        for n in fm.nodes:
            if not (isinstance(n, ast.Call) and call_name(n) == "save" and n.args):
                continue
            values = _saved_values(fm, n.args[0], n.lineno)
            optimizers = _state_of(values, fm, R.OPTIMIZER)
            if optimizers:
                yield Hit(n, f"the checkpoint keeps {optimizers[0]}.state_dict() but not the state of "
                             f"{missing[0]} (stepped at line {schedulers[missing[0]].lineno}): a resumed run "
                             "restarts the LR schedule from its first step")
