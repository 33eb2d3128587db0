"""TB412 resume-repeats-epoch: The checkpoint stores the epoch it finished, and the resume starts again at that epoch.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dict_entries, dotted, walk
from trickbag.audit._eval_facts import bound_args
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit._query import checkpoint_position
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []


def _last(name: str | None) -> str:
    return (name or "").split(".")[-1]


def _stores(scope: ast.AST, key: str, var: str) -> ast.AST | None:
    """A dict built in ``scope`` whose ``key`` entry is the bare name ``var``, in a scope that saves: the entry."""
    if not any(isinstance(n, ast.Call) and "save" in call_name(n).lower() for n in walk(scope)):
        return None
    for n in walk(scope):
        for k, v in dict_entries(n):
            if k == key and isinstance(v, ast.Name) and v.id == var:
                return v
    return None


def _saves_loop_var(fm: FunctionModel, loop: ast.For, key: str) -> ast.AST | None:
    """Where the loop body saves its own variable under ``key`` after the epoch's work: a dict entry in the body,
    or a call of a local helper that receives the variable and saves it under ``key``."""
    if not isinstance(loop.target, ast.Name):
        return None
    var = loop.target.id
    body = ast.Module(body=loop.body, type_ignores=[])
    if (entry := _stores(body, key, var)) is not None:
        return entry
    for n in walk(body):
        if not isinstance(n, ast.Call):
            continue
        helper = fm.file.resolve(n, fm)
        if helper is None or not isinstance(helper.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for param, arg in bound_args(helper, n):
            if isinstance(arg, ast.Name) and arg.id == var and _stores(helper.node, key, param) is not None:
                return n
    return None


def _resume_loops(file: FileModel, target: str) -> Iterator[tuple[FunctionModel, ast.For]]:
    """``for epoch in range(start_epoch, ...)`` loops of the file that start at ``target``."""
    for fm in file.functions:
        for n in fm.nodes:
            if isinstance(n, ast.For) and isinstance(n.iter, ast.Call) and call_name(n.iter) == "range" \
                    and len(n.iter.args) >= 2 and _last(dotted(n.iter.args[0])) == _last(target) \
                    and (dotted(n.iter.args[0]) == target or target.startswith("self.")):
                yield fm, n


@rule("TB412", "resume-repeats-epoch",
      fix="save the epoch to start from (epoch + 1), or resume from ckpt['epoch'] + 1 — one of the two, not both")
def resume_repeats_epoch(file: FileModel) -> Iterator[Hit]:
    """The checkpoint stores the epoch it finished, and the resume starts again at that epoch.

    A checkpoint written at the end of epoch ``e`` holds the weights and optimizer state after ``e``.  If it
    stores ``"epoch": e`` and the resume does ``start_epoch = ckpt["epoch"]`` and ``for epoch in
    range(start_epoch, epochs)``, the resumed run trains epoch ``e`` a second time: one silent extra epoch, the
    LR schedule shifted by one, and the checkpoint of that epoch overwritten.  Either side fixes it (store
    ``e + 1``, or start from ``ckpt["epoch"] + 1``); the code has neither.

    Reported at the resume assignment (``start_epoch = ckpt["epoch"]``, the key read without an offset from a
    loaded checkpoint) when the file has a ``for ... in range(start_epoch, ...)`` loop whose body saves a dict
    with that key holding the loop's own variable (directly, or through a local helper that receives it and saves
    it under that key).

    Wrong::

        start_epoch = 0
        if args.resume:
            ckpt = torch.load(args.resume)
            model.load_state_dict(ckpt["model"])
            start_epoch = ckpt["epoch"]
        for epoch in range(start_epoch, args.epochs):
            train_one_epoch(model, loader, optimizer)
            torch.save({"epoch": epoch, "model": model.state_dict()}, "last.pt")

    Right::

        start_epoch = 0
        if args.resume:
            ckpt = torch.load(args.resume)
            model.load_state_dict(ckpt["model"])
            start_epoch = ckpt["epoch"] + 1
        for epoch in range(start_epoch, args.epochs):
            train_one_epoch(model, loader, optimizer)
            torch.save({"epoch": epoch, "model": model.state_dict()}, "last.pt")
    """
    for fm in file.functions:
        for n in fm.nodes:
            if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and (target := dotted(n.targets[0]))):
                continue
            key = checkpoint_position(fm, n.value)
            if not key or "epoch" not in key.lower():
                continue
            for loop_fm, loop in _resume_loops(file, target):
                where = _saves_loop_var(loop_fm, loop, key)
                if where is not None:
                    yield Hit(n, f"{target} resumes at ckpt['{key}'], but line {getattr(where, 'lineno', 0)} saves "
                                 f"'{key}' as the epoch just finished: a resumed run trains that epoch again")
                    break
