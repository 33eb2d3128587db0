"""TB408 best-state-not-copied: The "best" state_dict is kept without a copy while training goes on.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, walk
from trickbag.audit._flow import BACKWARD, STEP, TRAIN_CALL, FileModel, FunctionModel, Loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

_NOT_MODELS = (R.OPTIMIZER, R.SCHEDULER, R.SCALER)


def _trains(loop: Loop) -> bool:
    """The loop updates weights: a backward or an optimizer step in it, a training call, or a helper of the file
    that does either (``Event.kinds`` follows the helpers)."""
    return any(e.kinds() & {BACKWARD, STEP, TRAIN_CALL} for e in loop.events)


def _used_after(fm: FunctionModel, name: str, after: int) -> ast.AST | None:
    """A use of the kept dict after line ``after``: loaded back (``load_state_dict(name)``), saved, or returned."""
    for n in fm.nodes:
        if getattr(n, "lineno", 0) <= after:
            continue
        if isinstance(n, ast.Call) and call_name(n) == "load_state_dict" and any(dotted(a) == name for a in n.args):
            return n
        if isinstance(n, ast.Call) and call_name(n) == "save" and n.args and dotted(n.args[0]) == name:
            return n
        if isinstance(n, ast.Return) and n.value is not None and any(dotted(x) == name for x in walk(n.value)):
            return n
    return None


def _later_use(file: FileModel, fm: FunctionModel, name: str, loop: Loop) -> ast.AST | None:
    use = _used_after(fm, name, getattr(loop.node, "end_lineno", 0) or 0)
    if use is None and name.startswith("self.") and fm.cls is not None:
        use = next((u for other in file.functions if other.cls is fm.cls and other is not fm
                    for u in [_used_after(other, name, -1)] if u is not None), None)
    return use


@rule("TB408", "best-state-not-copied", fix="best_state = copy.deepcopy(model.state_dict()) (or {k: v.detach().clone() "
      "for k, v in model.state_dict().items()})")
def best_state_not_copied(file: FileModel) -> Iterator[Hit]:
    """The "best" state_dict is kept without a copy while training goes on.

    ``model.state_dict()`` returns references to the model's own parameter and buffer tensors, not a snapshot:
    every later ``optimizer.step()`` changes the kept dict too.  ``best = model.state_dict()`` at the best
    validation epoch, then ``model.load_state_dict(best)`` after training, loads the *last* weights, and the
    reported "best epoch" is a label on the final model (early stopping restores nothing).  Copy it:
    ``copy.deepcopy(model.state_dict())``, or ``{k: v.detach().clone() for k, v in ...}`` (``torch.save`` to a file
    at that moment is a copy too).

    Reported at ``X = model.state_dict()`` (no copy around it) inside a loop that trains (a backward or an optimizer
    step in it, directly or in a helper of the file it calls), when ``X`` is used after that loop: loaded back with
    ``load_state_dict(X)``, saved with ``torch.save(X, ...)``, or returned; for ``self.X``, also in another method of
    the class (``fit()`` loading what ``_train_model()`` kept).  An optimizer's, scheduler's or scaler's
    ``state_dict()`` is left alone.

    Wrong::

        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            acc = evaluate(model, val_loader)
            if acc > best_acc:
                best_acc = acc
                best_state = model.state_dict()
        model.load_state_dict(best_state)

    Right::

        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            acc = evaluate(model, val_loader)
            if acc > best_acc:
                best_acc = acc
                best_state = copy.deepcopy(model.state_dict())
        model.load_state_dict(best_state)
    """
    for fm in file.functions:
        for loop in fm.loops:
            if not _trains(loop):
                continue
            for a in fm.assigns:
                value = a.value
                if loop not in a.loops or len(a.names) != 1 or a.op is not None or a.is_append \
                        or not (isinstance(value, ast.Call) and call_name(value) == "state_dict" and not value.args
                                and not value.keywords and isinstance(value.func, ast.Attribute)):
                    continue
                owner = dotted(value.func.value) or ""
                if not owner or fm.role(owner) in _NOT_MODELS:
                    continue
                use = _later_use(file, fm, a.names[0], loop)
                if use is not None:
                    line = getattr(use, "lineno", "?")
                    yield Hit(a.node, f"{a.names[0]} = {owner}.state_dict() keeps references to the live weights, "
                                      f"not a copy: training goes on in this loop, so what line {line} uses is the "
                                      "last state, not the best")
