"""TB121 grad-scaler-recreated: A GradScaler is created anew for every epoch (or every batch) of one training.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, const_value, dotted, walk
from trickbag.audit._flow import BACKWARD, SCALE, FileModel, FunctionModel, Loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []


def _target(fm: FunctionModel, call: ast.Call) -> str | None:
    """The name the new scaler is bound to (``scaler = GradScaler()``, ``self.scaler = ...``)."""
    for n in fm.nodes:
        if isinstance(n, ast.Assign) and n.value is call and len(n.targets) == 1:
            return dotted(n.targets[0])
        if isinstance(n, ast.AnnAssign) and n.value is call:
            return dotted(n.target)
    return None


def _inside(stmt: ast.AST, node: ast.AST) -> bool:
    return any(x is node for x in walk(stmt))


def _guarded_once(fm: FunctionModel, call: ast.Call, name: str) -> bool:
    """Created under an ``if`` that tests the scaler itself (``if self.scaler is None: self.scaler = ...``):
    made once, on first use."""
    last = name.split(".")[-1]
    return any(isinstance(n, ast.If) and _inside(n, call)
               and any(dotted(x) in (name, last) for x in walk(n.test) if isinstance(x, (ast.Name, ast.Attribute)))
               for n in fm.nodes)


def _restored(fm: FunctionModel, name: str) -> bool:
    """``scaler.load_state_dict(...)`` in the function: its scale is carried over."""
    return any(isinstance(n, ast.Call) and call_name(n) == "load_state_dict" and isinstance(n.func, ast.Attribute)
               and dotted(n.func.value) == name for n in fm.nodes)


def _scales(fm: FunctionModel, name: str, loops: list[Loop]) -> bool:
    """The scaler scales a loss inside one of ``loops`` (of this function)."""
    return any(e.kind == SCALE and e.recv == name and any(lp in e.loops for lp in loops) for e in fm.events)


def _fresh_training(fm: FunctionModel, stmt: ast.AST) -> bool:
    """``stmt`` builds an optimizer (each pass trains something new: a fold, a run of a sweep, a new model)."""
    return any(isinstance(n, ast.Call) and R.role_by_constructor(n, fm.file.imports, fm.file.class_names)
               in (R.OPTIMIZER, R.MODEL) for n in walk(stmt))


#: parameter names that hold the current epoch (not a count of epochs)
_EPOCH_PARAMS = {"epoch", "cur_epoch", "current_epoch", "curr_epoch", "epoch_idx", "epoch_id", "epoch_num", "i_epoch",
                 "ep", "e"}


def _loop_words(lp: Loop) -> str:
    """The names a loop's header uses (target and iterable, or a while loop's test)."""
    parts = [getattr(lp.node, "target", None), lp.iter, getattr(lp.node, "test", None)]
    return " ".join(dotted(x) or "" for p in parts if p is not None for x in walk(p)
                    if isinstance(x, (ast.Name, ast.Attribute)))


def _in_epoch_loop(fm: FunctionModel, name: str) -> bool:
    """The scaler scales inside a loop over epochs of this function (the function runs the whole training)."""
    return any(e.kind == SCALE and e.recv == name and any("epoch" in _loop_words(lp).lower() for lp in e.loops[:-1])
               for e in fm.events)


def _per_epoch_function(fm: FunctionModel) -> str | None:
    """Why ``fm`` runs once per epoch of a longer training: it is called inside a loop of the file, or takes the
    epoch as a parameter; None otherwise."""
    args = getattr(fm.node, "args", None)
    if args is None:
        return None
    if any(site.loops for site in fm.call_sites()):
        return f"{fm.name}() is called inside a loop"
    params = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    epoch = next((p for p in params if p in _EPOCH_PARAMS), None)
    return f"{fm.name}() takes the epoch ({epoch})" if epoch else None


def _batch_loops(fm: FunctionModel) -> list[Loop]:
    return [lp for lp in fm.loops if any(BACKWARD in e.kinds() or e.kind == SCALE for e in lp.events)]


def _check(fm: FunctionModel, call: ast.Call) -> str | None:
    name = _target(fm, call)
    if name is None or _guarded_once(fm, call, name) or _restored(fm, name):
        return None
    batch = _batch_loops(fm)
    if not _scales(fm, name, batch):
        return None
    around = [lp for lp in fm.loops if _inside(lp.node, call)]
    if around:
        inner = around[-1]
        if any(_fresh_training(fm, s) for s in getattr(inner.node, "body", [])):
            return None
        where = "every batch" if inner in batch else "every pass of the loop"
        return f"created for {where} (line {getattr(inner.node, 'lineno', 0)})"
    if any(_fresh_training(fm, s) for s in fm.body()) or _in_epoch_loop(fm, name):
        return None
    why = _per_epoch_function(fm)
    return f"created at every call of {fm.name}(): {why}" if why else None


@rule("TB121", "grad-scaler-recreated",
      fix="create the GradScaler once, before the epoch loop, pass it in, and keep its state_dict in the checkpoint")
def grad_scaler_recreated(file: FileModel) -> Iterator[Hit]:
    """A GradScaler is created anew for every epoch (or every batch) of one training.

    The fp16 loss scale is learned during the run: ``GradScaler`` starts at 2**16, halves it and skips the
    optimizer step on every overflow, and grows it again after 2000 clean steps.  Created at the top of a
    per-epoch ``train(...)`` function, or inside the epoch loop, every epoch starts again from 2**16: the first
    steps of each epoch overflow and are skipped (the batches are lost), and a scale that had grown is thrown
    away.  Created per batch, no step ever sees a calibrated scale and the growth never happens.

    Reported at the ``GradScaler(...)`` call whose scaler scales a loss in the same function's batch loop, when
    the call sits inside a loop of that function, or at the top of a function that is called inside a loop of
    the file or takes the epoch as a parameter.  Not reported when the loop (or the function) also builds an
    optimizer or a model (each pass is a new training: a fold, a sweep), when an ``if`` that tests the scaler
    guards the creation (made once, lazily), when the function restores the scaler's ``load_state_dict``, or for
    ``GradScaler(enabled=False)``.

    Wrong::

        def train_one_epoch(model, loader, optimizer, epoch):
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()

    Right::

        def train_one_epoch(model, loader, optimizer, scaler, epoch):
            for x, y in loader:
                ...

        scaler = torch.amp.GradScaler("cuda")
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer, scaler, epoch)
    """
    if "GradScaler" not in file.identifiers():
        return
    for fm in file.functions:
        for n in fm.nodes:
            if not (isinstance(n, ast.Call) and call_name(n) == "GradScaler"):
                continue
            if any(k.arg == "enabled" and const_value(k.value) is False for k in n.keywords):
                continue
            where = _check(fm, n)
            if where:
                yield Hit(n, f"a new GradScaler is {where}: its loss scale restarts at 2**16, so the first "
                             "steps after each restart overflow and are skipped")
