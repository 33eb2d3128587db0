"""TB406 resume-position-unused: A resume loads the epoch (or step) it stopped at, and the loop starts from 0 anyway.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trickbag.audit._ast import call_name, dotted, walk
from trickbag.audit._flow import FileModel, FunctionModel
from trickbag.audit._query import POSITION_KEY, checkpoint_position
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: calls that only show a value
_SHOWS = {"print", "format", "info", "debug", "warning", "warn", "log", "write", "set_description", "set_postfix",
          "add_scalar", "log_dict"}


def _shown_only(fm: FunctionModel, name: str, after: int) -> bool:
    """Every read of ``name`` after line ``after`` only shows it (a print, a log call, a format)."""
    parents: dict[int, ast.AST] = {}
    for n in fm.nodes:
        for c in ast.iter_child_nodes(n):
            parents[id(c)] = n
    for n in fm.nodes:
        if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                and getattr(n, "lineno", 0) > after):
            continue
        p, shown = parents.get(id(n)), False
        while p is not None and not isinstance(p, ast.stmt):
            if isinstance(p, ast.Call) and call_name(p) in _SHOWS or isinstance(p, ast.JoinedStr):
                shown = True
                break
            p = parents.get(id(p))
        if not shown:
            return False
    return True


def _epoch_loop(fm: FunctionModel, after: int) -> ast.For | None:
    """The first ``for epoch in range(...)`` (or step / iteration) after line ``after``."""
    for n in fm.nodes:
        if isinstance(n, ast.For) and n.lineno > after and isinstance(n.iter, ast.Call) \
                and call_name(n.iter) == "range" and POSITION_KEY.search(dotted(n.target) or ""):
            return n
    return None


@rule("TB406", "resume-position-unused", fix="start the loop where the checkpoint stopped: "
      "for epoch in range(start_epoch, epochs)")
def resume_position_unused(file: FileModel) -> Iterator[Hit]:
    """A resume loads the epoch (or step) it stopped at, and the loop starts from 0 anyway.

    ``start_epoch = checkpoint['epoch']`` read from a loaded checkpoint and then only printed: the epoch loop
    ``for epoch in range(opt.num_epochs)`` runs the whole schedule again on the resumed weights.  The learning-rate
    schedule restarts from its first epoch, the run trains longer than asked, and every epoch number it logs and
    saves is off.

    Reported at the epoch loop (a ``for`` over ``range(...)`` whose variable says epoch, step or iteration) after
    the load, when the position read from the checkpoint (a key that says epoch, step or iteration, from a name
    assigned ``torch.load(...)`` or named like a checkpoint) is never used other than in a print, a log call or a
    format, and the loop's ``range`` does not use it.  A function without such a loop (a save helper, a
    loader for evaluation that prints the epoch it loads) is not a resume and is not reported.

    Wrong::

        checkpoint = torch.load(args.resume)
        model.load_state_dict(checkpoint["model"])
        start_epoch = checkpoint["epoch"]
        print(f"resumed from epoch {start_epoch}")
        for epoch in range(args.epochs):
            train_one_epoch(model, loader, optimizer)

    Right::

        checkpoint = torch.load(args.resume)
        model.load_state_dict(checkpoint["model"])
        start_epoch = checkpoint["epoch"] + 1
        for epoch in range(start_epoch, args.epochs):
            train_one_epoch(model, loader, optimizer)
    """
    for fm in file.functions:
        for a in fm.assigns:
            if len(a.names) != 1 or a.op is not None or a.value is None or "." in a.names[0]:
                continue
            key = checkpoint_position(fm, a.value)
            line = getattr(a.node, "lineno", 0)
            if key is None or not _shown_only(fm, a.names[0], line) \
                    or any(isinstance(n, (ast.Global, ast.Nonlocal)) and a.names[0] in n.names for n in fm.nodes):
                continue
            loop = _epoch_loop(fm, line)
            if loop is not None and a.names[0] not in {n.id for n in walk(loop.iter) if isinstance(n, ast.Name)}:
                yield Hit(loop, f"{a.names[0]} is read from the checkpoint's {key!r} and never used (only shown): "
                                f"this loop starts from 0 again")
