"""TB116 sampler-epoch-not-set: A ``DistributedSampler`` feeds an epoch loop that never calls ``set_epoch``.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted
from trickbag.audit._flow import FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []

#: frameworks whose loops call ``set_epoch`` on the loader's sampler themselves
_SETS_EPOCH = ("lightning", "pytorch_lightning", "accelerate", "ignite", "composer", "transformers", "fabric")
#: a sampler or its data set named for evaluation: its order does not matter
_EVAL_NAME = re.compile(r"(^|_)(val|valid|validation|test|eval|evaluation|dev)(_|$)", re.IGNORECASE)
_EPOCH_NAME = re.compile(r"epoch", re.IGNORECASE)
#: a call that trains an epoch (``train_epoch(...)``, ``trainer.fit_one(...)``) or is handed the data
_HANDLER = re.compile(r"train|epoch|fit|run", re.IGNORECASE)
_LOADER = re.compile(r"loader|sampler|data", re.IGNORECASE)


@rule("TB116", "sampler-epoch-not-set", fix="call sampler.set_epoch(epoch) at the start of every epoch",
      severity="warning")
def sampler_epoch_not_set(file: FileModel) -> Iterator[Hit]:
    """A ``DistributedSampler`` feeds an epoch loop that never calls ``set_epoch``.

    ``DistributedSampler`` shuffles with a generator seeded by ``seed + epoch``, and its epoch is whatever
    ``set_epoch`` last set: never called, it is 0 in every epoch, so every epoch visits the samples in the
    same order on every process (PyTorch's docs: "calling set_epoch() at the beginning of each epoch before
    creating the DataLoader iterator is necessary to make shuffling work properly across multiple epochs").
    Training still runs, which is why it goes unnoticed; the model sees one fixed order of batches.

    Reported at the epoch loop (a ``for`` whose target or range names an epoch) that follows a shuffling
    ``DistributedSampler`` built in the same function, when nothing in the file calls ``.set_epoch(...)``. Not
    reported: ``shuffle=False`` (nothing to reshuffle), a sampler or data set named for evaluation
    (``val_sampler``, ``DistributedSampler(test_set)``: the order of an evaluation does not matter), a sampler
    built in one function and looped over in another (a data module returns it; the loop may set the epoch), an
    epoch loop that hands its epoch to a function of another module (``trainer.train_epoch(loader, epoch)`` may
    call ``loader.sampler.set_epoch(epoch)``), and files that use a framework whose loop sets the epoch itself
    (Lightning, Accelerate, Ignite, Composer, the Hugging Face Trainer).

    Wrong::

        sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, batch_size=32, sampler=sampler)
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()

    Right::

        sampler = DistributedSampler(train_set)
        loader = DataLoader(train_set, batch_size=32, sampler=sampler)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
    """
    samplers = [n for n in file.nodes if isinstance(n, ast.Call) and _shuffling_sampler(file, n)]
    if not samplers or _sets_epoch(file) or _framework(file):
        return
    loops = [n for n in file.nodes if isinstance(n, (ast.For, ast.AsyncFor)) and _epoch_loop(n)]
    if not loops:
        return
    defined = {n.name for n in file.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    reported: set[int] = set()
    for call in samplers:
        home = _enclosing_function(file.tree, call)
        mine = [lp for lp in loops if _enclosing_function(file.tree, lp) is home and lp.lineno > call.lineno
                and not _hands_on_the_epoch(lp, defined)]
        if not mine or id(mine[0]) in reported:
            continue
        reported.add(id(mine[0]))
        yield Hit(mine[0], f"the DistributedSampler built on line {call.lineno} is never given set_epoch(): it "
                           "shuffles in the same order every epoch")


def _shuffling_sampler(file: FileModel, call: ast.Call) -> bool:
    """``DistributedSampler(...)`` (any import path) without ``shuffle=False``, not named for evaluation."""
    name = file.imports.qualname(call) or call_name(call)
    if name.rsplit(".", 1)[-1] != "DistributedSampler":
        return False
    if any(k.arg == "shuffle" and const_value(k.value) is False for k in call.keywords):
        return False
    data = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "dataset"), None)
    if data is not None and _EVAL_NAME.search((dotted(data) or "").rsplit(".", 1)[-1]):
        return False
    target = _assigned_name(file.tree, call)
    return not (target and _EVAL_NAME.search(target))


def _assigned_name(tree: ast.AST, call: ast.Call) -> str:
    """The last part of the name ``call`` is assigned to (``self.val_sampler = DistributedSampler(...)``), ''."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.value is call:
            return (dotted(node.targets[0]) or "").rsplit(".", 1)[-1]
        if isinstance(node, ast.keyword) and node.value is call and node.arg:
            return node.arg
    return ""


def _sets_epoch(file: FileModel) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "set_epoch"
               for n in file.nodes)


def _framework(file: FileModel) -> bool:
    return any(q.split(".")[0] in _SETS_EPOCH for q in file.imports.alias.values())


def _epoch_loop(loop: ast.For | ast.AsyncFor) -> bool:
    """``for epoch in ...`` / ``for this_epoch in ...`` / ``for _ in range(args.epochs)``."""
    names = [n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)]
    if any(_EPOCH_NAME.search(n) for n in names):
        return True
    return any(_EPOCH_NAME.search(dotted(n) or "") for n in ast.walk(loop.iter) if isinstance(n, (ast.Name,
                                                                                                   ast.Attribute)))


def _hands_on_the_epoch(loop: ast.For | ast.AsyncFor, defined: set[str]) -> bool:
    """The loop passes its epoch to a function this file does not define (``trainer.train_epoch(loader, epoch)``):
    that function may set the sampler's epoch, out of this check's sight."""
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    for node in ast.walk(loop):
        if not isinstance(node, ast.Call) or call_name(node) in defined:
            continue
        args = [*node.args, *(k.value for k in node.keywords)]
        if not any(isinstance(a, ast.Name) and a.id in names for a in args):
            continue
        others = " ".join(dotted(a) or "" for a in args)
        if _HANDLER.search(call_name(node)) or _LOADER.search(others):  # a training step, or the loader goes along
            return True
    return False


def _enclosing_function(tree: ast.AST, target: ast.AST) -> ast.AST | None:
    """The innermost function holding ``target`` (None: the module body)."""
    found: ast.AST | None = None

    def visit(node: ast.AST, fn: ast.AST | None) -> bool:
        nonlocal found
        if node is target:
            found = fn
            return True
        inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else fn
        return any(visit(child, inner) for child in ast.iter_child_nodes(node))

    visit(tree, None)
    return found
