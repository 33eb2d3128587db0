"""TB409 wrapped-checkpoint-unloadable: A wrapped model's state_dict is saved where the same code loads checkpoints
into the plain model.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dotted, walk
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: wrappers whose state_dict keys carry a prefix: ``module.`` (DDP, DataParallel), ``_orig_mod.`` (torch.compile)
_WRAPPERS = {"DistributedDataParallel": "module.", "DataParallel": "module.", "DDP": "module.",
             "compile": "_orig_mod."}
_SAVES = {"save", "save_file"}


def _wrap(value: ast.AST | None, name: str) -> str | None:
    """The key prefix when ``value`` wraps the model called ``name`` (``DistributedDataParallel(model, ...)``,
    ``torch.compile(model)``), else None."""
    if not (isinstance(value, ast.Call) and value.args and dotted(value.args[0]) == name):
        return None
    func = dotted(value.func) or ""
    last = func.split(".")[-1]
    if last == "compile" and func not in ("torch.compile", "compile"):
        return None
    return _WRAPPERS.get(last)


def _strips_prefix(file: FileModel) -> bool:
    """The file handles the prefix somewhere (``k.replace('module.', '')``, ``consume_prefix_in_state_dict_if_present``,
    a ``'module.'`` string): it loads either form."""
    for n in file.nodes:
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and ("module." in n.value
                                                                          or "_orig_mod" in n.value):
            return True
        if isinstance(n, ast.Call) and "prefix" in call_name(n):
            return True
    return False


def _saved(fm: FunctionModel, name: str, after: int) -> Iterator[ast.Call]:
    """``name.state_dict()`` inside a save call after line ``after``."""
    for n in fm.nodes:
        if isinstance(n, ast.Call) and call_name(n) in _SAVES and n.lineno > after:
            for c in walk(n):
                if isinstance(c, ast.Call) and call_name(c) == "state_dict" and isinstance(c.func, ast.Attribute) \
                        and dotted(c.func.value) == name and not c.args:
                    yield c


def _unwrapped_branch(fm: FunctionModel, wrap: ast.AST, save: ast.AST) -> bool:
    """The save sits in the ``else`` of an ``if`` with the same test as the one the wrap is under (``if
    args.distributed: model = DDP(model)`` ... ``if args.distributed: save(model.module...) else: save(model...)``):
    there the model was never wrapped."""
    def inside(stmts: list[ast.stmt], node: ast.AST) -> bool:
        return any(x is node for st in stmts for x in walk(st))

    ifs = [n for n in fm.nodes if isinstance(n, ast.If)]
    tests = {ast.dump(i.test) for i in ifs if inside(i.body, wrap)}
    return any(ast.dump(i.test) in tests and inside(i.orelse, save) for i in ifs)


@rule("TB409", "wrapped-checkpoint-unloadable",
      fix="save model.module.state_dict() (torch.compile: model._orig_mod.state_dict()), the keys the plain model "
          "loads")
def wrapped_checkpoint_unloadable(file: FileModel) -> Iterator[Hit]:
    """A wrapped model's state_dict is saved where the same code loads checkpoints into the plain model.

    ``DistributedDataParallel(model)`` and ``DataParallel(model)`` hold the model as ``.module``, so their
    ``state_dict()`` keys all start with ``module.``; ``torch.compile(model)`` adds ``_orig_mod.``.  A function
    that restores a checkpoint into the plain model before wrapping it (``model.load_state_dict(torch.load(
    args.restart_from))``, then ``model = DistributedDataParallel(model)``) and then saves the wrapper's
    ``state_dict()`` writes checkpoints its own restore cannot read: missing and unexpected keys, or with
    ``strict=False`` nothing loaded.  The single-process run, unwrapped, works, so the mistake shows on the first
    distributed resume.

    Reported at ``model.state_dict()`` inside a save call (``torch.save``, safetensors' ``save_file``) when, in the
    same function, ``model`` is rebound to a wrapper of itself (``DistributedDataParallel``, ``DataParallel``,
    ``torch.compile``) after a ``model.load_state_dict(...)``, except in the ``else`` branch of an ``if`` with the
    test the wrap is under (``if args.distributed: ... else: torch.save(model.state_dict(), ...)``: never wrapped
    there).  Not reported in a file that handles the prefix anywhere (a ``'module.'`` string,
    ``consume_prefix_in_state_dict_if_present``): it reads either form.

    Wrong::

        if args.restart_from:
            model.load_state_dict(torch.load(args.restart_from))
        if args.distributed:
            model = DistributedDataParallel(model, device_ids=[args.local_rank])
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            torch.save(model.state_dict(), f"checkpoint-{epoch}.pt")

    Right::

        if args.restart_from:
            model.load_state_dict(torch.load(args.restart_from))
        if args.distributed:
            model = DistributedDataParallel(model, device_ids=[args.local_rank])
        for epoch in range(epochs):
            train_one_epoch(model, loader, optimizer)
            plain = model.module if args.distributed else model
            torch.save(plain.state_dict(), f"checkpoint-{epoch}.pt")
    """
    if not any(isinstance(n, ast.Call) and call_name(n) == "load_state_dict" for n in file.nodes) \
            or _strips_prefix(file):
        return
    for fm in file.functions:
        loads = {(dotted(n.func.value), n.lineno) for n in fm.nodes if isinstance(n, ast.Call)
                 and call_name(n) == "load_state_dict" and isinstance(n.func, ast.Attribute)}
        for n in fm.nodes:
            if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and (name := dotted(n.targets[0]))):
                continue
            prefix = _wrap(n.value, name)
            if prefix is None or not any(who == name and line < n.lineno for who, line in loads):
                continue
            rebound = [a.lineno for a in fm.nodes if isinstance(a, ast.Assign) and a.lineno > n.lineno
                       and any(dotted(t) == name for t in a.targets)]  # ``model = model.module``
            for c in _saved(fm, name, n.lineno):
                if any(line < c.lineno for line in rebound) or _unwrapped_branch(fm, n, c):
                    continue
                yield Hit(c, f"{name}.state_dict() of the wrapped model (line {n.lineno}): every key starts with "
                             f"'{prefix}', but this function restores checkpoints into the plain {name} (before "
                             "wrapping it), which will not load them")

