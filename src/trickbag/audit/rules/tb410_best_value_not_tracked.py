"""TB410 best-value-not-tracked: The best value a loop compares against is never updated, or updated on every pass.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import dotted, name_tokens, walk
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

_EXTREMES = {"min", "max", "lowest", "highest", "smallest", "largest"}
_METRICS = {"loss", "losses", "acc", "accuracy", "score", "metric", "err", "error", "f1", "auc", "iou", "miou", "map",
            "psnr", "ssim", "dice", "ppl", "perplexity", "val", "valid", "validation", "bleu", "rouge", "fid", "mae",
            "mse", "rmse", "wer", "cer", "ap", "r2", "ndcg", "recall", "precision", "reward", "return", "objective"}
_COMPARE = (ast.Lt, ast.Gt, ast.LtE, ast.GtE)


def _best_name(name: str | None) -> bool:
    """``best_val_loss``, ``self.best_acc``, ``min_loss``, ``max_score``: a name for the best value seen so far; not
    an upper-case constant (``BEST_NET_WIN_RATIO = 0.6``: a threshold to beat, by its spelling)."""
    last = (name or "").split(".")[-1]
    if last.isupper():
        return False
    words = set(name_tokens(last))
    return "best" in words and not words & {"epoch", "step", "iter", "model", "state", "path", "file", "ckpt"} \
        or bool(words & _EXTREMES and words & _METRICS)


def _comparisons(test: ast.AST) -> Iterator[tuple[str, str]]:
    """(best name, compared value) for ``value < best`` / ``best > value`` & co. in an ``if`` test."""
    for n in walk(test):
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], _COMPARE):
            left, right = dotted(n.left) or "", dotted(n.comparators[0]) or ""
            if right and _best_name(right) and left and not _best_name(left):
                yield right, left
            elif left and _best_name(left) and right and not _best_name(right):
                yield left, right


def _blocks(fm: FunctionModel) -> Iterator[list[ast.stmt]]:
    for n in [fm.node, *fm.nodes]:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _assigns(nodes: Iterator[ast.AST] | list[ast.AST], name: str) -> bool:
    """Some node assigns ``name`` (also as an item of a tuple target: ``best, best_epoch = acc, epoch``)."""
    return any(isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
        dotted(x) == name for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) for x in walk(t))
        for n in nodes)


def _updated_elsewhere(file: FileModel, fm: FunctionModel, name: str, inside: list[ast.AST]) -> bool:
    """``self.best`` assigned by a method the loop calls (``self.update_best(val)``, or a method that method calls),
    or a name declared global or nonlocal (another function may update it)."""
    if name.startswith("self.") and fm.cls is not None:
        methods = {o.name: o for o in file.functions if o.cls is fm.cls and o is not fm}
        todo = [n.func.attr for n in inside if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and dotted(n.func.value) == "self"]
        seen: set[str] = set()
        while todo:
            m = methods.get(todo.pop())
            if m is None or m.name in seen:
                continue
            seen.add(m.name)
            if _assigns(m.nodes, name):
                return True
            todo += [n.func.attr for n in m.nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and dotted(n.func.value) == "self"]
        return False
    return any(isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names for n in fm.nodes)


def _records_a_best(node: ast.If) -> bool:
    """The winning branch keeps something as the best: it saves (a call named ``save...``) or assigns another
    best-named value (``best_val_acc = val_acc``): a best-model branch, not a threshold test."""
    for n in (x for st in node.body for x in walk(st)):
        if isinstance(n, ast.Call) and "save" in ((dotted(n.func) or "").split(".")[-1]).lower():
            return True
        if isinstance(n, ast.Assign) and any(_best_name(dotted(t)) for t in n.targets):
            return True
    return False


def _initialised(file: FileModel, fm: FunctionModel, name: str, loop: ast.AST) -> bool:
    """The running best starts here: assigned in this function before the loop, or (``self.best``) by another method
    of the class (``__init__``, a checkpoint loader) — not a parameter, a setting or a module constant (a
    threshold)."""
    start = getattr(loop, "lineno", 0)
    if any(isinstance(n, ast.Assign) and n.lineno < start and any(dotted(t) == name for t in n.targets)
           for n in fm.nodes):
        return True
    if not (name.startswith("self.") and fm.cls is not None):
        return False
    return any(other.cls is fm.cls and other is not fm and _assigns(other.nodes, name) for other in file.functions)


@rule("TB410", "best-value-not-tracked", fix="update the best value inside the improvement branch: if val < best: "
      "best = val; save(...)")
def best_value_not_tracked(file: FileModel) -> Iterator[Hit]:
    """The best value a loop compares against is never updated, or updated on every pass.

    Keeping the best checkpoint takes two lines: the comparison with the best value so far, and, in the branch that
    wins, the update of that value.  Without the update (``if best_val_loss is None or val_loss < best_val_loss:
    save("best.pt")`` and nothing else) every validation that beats the initial value wins: ``best.pt`` is the latest
    model, early stopping never counts.  With the update outside the branch (``if val_loss < min_loss: save(...)``
    then ``min_loss = val_loss`` on every pass) the best value is the last one: any epoch that beats the previous
    epoch overwrites the best checkpoint.

    Reported inside a loop, for a name of the best value (``best_*``, ``self.best_acc``, ``min_loss``,
    ``max_score``) compared with ``<``, ``>``, ``<=`` or ``>=`` in an ``if`` test: at the assignment ``best = value``
    of the compared value in the same block as that ``if`` (outside its branch), and at the ``if`` when nothing in the
    function's loop assigns the best name (nor a method of the class the loop calls, nor anything after a ``global``
    statement: a helper may update it), the name starts in this function before the loop (``self.best``: in another
    method of the class; not a parameter or a setting, which would be a threshold), and the winning branch keeps a
    best (a ``save...`` call, or another best-named value assigned).  An upper-case name (``BEST_NET_WIN_RATIO``)
    is a constant by its spelling: a threshold to beat, not reported.

    Wrong::

        min_loss = float("inf")
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            val_loss = evaluate(model, val_loader)
            if val_loss < min_loss:
                torch.save(model.state_dict(), "best.pt")
            min_loss = val_loss

    Right::

        min_loss = float("inf")
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            val_loss = evaluate(model, val_loader)
            if val_loss < min_loss:
                torch.save(model.state_dict(), "best.pt")
                min_loss = val_loss
    """
    for fm in file.functions:
        loops = [lp.node for lp in fm.loops if isinstance(lp.node, (ast.For, ast.While))]
        if not loops:
            continue
        blocks = list(_blocks(fm))
        for loop in loops:
            inside = list(walk(loop))
            for node in inside:
                if not isinstance(node, ast.If):
                    continue
                for best, value in _comparisons(node.test):
                    block = next((b for b in blocks if any(s is node for s in b)), [])
                    every = [s for s in block if isinstance(s, ast.Assign) and len(s.targets) == 1
                             and dotted(s.targets[0]) == best and dotted(s.value) == value]
                    if every:
                        yield Hit(every[0], f"{best} = {value} runs on every pass, not only when {value} beats it: "
                                            f"{best} holds the last value, so the comparison on line {node.lineno} "
                                            "keeps the latest model, not the best")
                    elif "[" not in best and _records_a_best(node) and _initialised(file, fm, best, loop) \
                            and not _assigns(inside, best) and not _updated_elsewhere(file, fm, best, inside):
                        yield Hit(node, f"{best} is compared here but never updated in this loop: every pass that "
                                        f"beats its first value counts as the best")
