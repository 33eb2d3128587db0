"""TB104 grads-never-zeroed: A loop steps the optimizer but never zeroes the gradients.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, dotted, walk
from trickbag.audit._flow import (
    BACKWARD,
    STEP,
    ZERO,
    Event,
    FileModel,
)
from trickbag.audit._project import project_methods
from trickbag.audit._query import short_name, train_loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _optimizer_models(file: FileModel) -> dict[str, set[str]]:
    """optimizer name -> short names of the models whose ``.parameters()`` it was built from."""
    return file.memo("optimizer_models", lambda: _find_optimizer_models(file))


def _find_optimizer_models(file: FileModel) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for fm in file.functions:
        for a in fm.assigns:
            if a.value is None or a.op is not None or len(a.names) != 1 or \
                    R.role_by_constructor(a.value, file.imports, file.class_names) != R.OPTIMIZER:
                continue
            out[a.names[0]] = {short_name(d) for n in walk(a.value) if isinstance(n, ast.Call)
                               and call_name(n) in ("parameters", "named_parameters")
                               and isinstance(n.func, ast.Attribute) and (d := dotted(n.func.value))}
    return out


def _zero_for(fm, z: Event, step: Event, several: bool) -> bool:
    """Does the zeroing ``z`` clear the gradients that ``step`` applies?"""
    if z.kind != ZERO or not several or z.recv is None or z.recv == step.recv:
        return True
    owners = _optimizer_models(fm.file).get(step.recv or "")
    return fm.role(z.recv) == R.MODEL and (not owners or short_name(z.recv) in owners)


def _zeroes(fm, loop, step: Event) -> bool:
    several = len({e.recv for e in loop.events if e.kind == STEP}) > 1
    if any(ZERO in e.kinds() and _zero_for(fm, e, step, several) for e in loop.events):
        return True
    names = list(loop.nested_defs) + list(step.extra.get("closure", []))
    helpers = [_helper_named(fm, name) for name in names]
    return any(h is not None and ZERO in fm.file.summary(h).kinds for h in helpers)


def _differentiable_step(fm, s: Event) -> bool:
    """``inner_optimizer.step(loss_inner)``: a step given a loss value, not a closure (higher's or learn2learn's
    differentiable optimizers compute the gradients of the loss themselves; nothing accumulates in ``.grad``)."""
    call = s.node
    if not isinstance(call, ast.Call) or not call.args or not isinstance(call.args[0], ast.Name):
        return False
    name = call.args[0].id
    if _helper_named(fm, name) is not None:
        return False
    values = [a.value for a in fm.assigns if name in a.names and a.value is not None]
    return not any(isinstance(v, ast.Lambda) for v in values)


def _helper_named(fm, name: str):
    scope = fm
    while scope is not None:
        if name in scope.nested:
            return scope.nested[name]
        scope = scope.parent
    return fm.file.top.get(name)


@rule("TB104", "grads-never-zeroed",
      fix="call optimizer.zero_grad() once per update (at the top of the iteration, or after step())")
def grads_never_zeroed(file: FileModel) -> Iterator[Hit]:
    """A loop steps the optimizer but never zeroes the gradients.

    ``backward()`` adds into ``.grad``; without ``zero_grad()`` every step uses the sum of all the
    gradients since the start of training, which grows without bound (a hidden, ever-increasing
    learning rate on a stale direction).  Each optimizer counts on its own (zeroing one does not zero
    another's parameters); distributed autograd (``dist_autograd.backward(context_id, ...)``) keeps its
    gradients in the RPC context, with nothing to zero, and a step given a loss value (``inner_optimizer.step(loss)``
    of higher's differentiable optimizers) computes its own gradients.

    A step function returned by a factory (``step = make_step(model, opt)``, ``make_step`` returning its
    nested ``def step``) is checked where it is called.  A framework-style ``strategy.optimizer_step(optimizer,
    model, scheduler)`` whose definitions in the project never call ``.step()`` on the optimizer they are given
    (OpenRLHF's DeepSpeed strategy steps the engine, whose ``step()`` zeroes the gradients itself) is a
    low-confidence finding (``--all``) with that reason.  By default the stepped object must be shown to be a
    torch optimizer: ``x.step()`` (or ``scaler.step(x)``) where ``x`` is named like one (``optimizer``,
    ``optim_d``, ``self.opt``) or is assigned from a ``torch.optim`` constructor in the file; an engine or a
    wrapper (``model_engine.step()``, ``strategy.optimizer_step(...)``) may zero the gradients in its own
    ``step()``, so that finding is low confidence with that reason.

    Wrong::

        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()

    Right::

        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
    """
    seen = set()
    for fm in file.functions:
        for s in fm.kind_events(STEP):
            loop = train_loop(s)
            hits: list[Hit]
            if loop is None:
                hits = list(_never_zeroed_helper(fm, s))
            elif id(loop) not in seen and not _zeroes(fm, loop, s) and not _distributed_autograd(loop) \
                    and not _differentiable_step(fm, s):
                seen.add(id(loop))
                hits = [Hit(s.node, "the loop steps the optimizer but never zeroes the gradients: "
                                    "backward() keeps adding into .grad")]
            else:
                continue
            why = _engine_step(file, s) or _not_an_optimizer(file, s)
            for hit in hits:
                yield dataclasses.replace(hit, confidence="low", message=hit.message + why) if why else hit


def _engine_step(file: FileModel, s: Event) -> str:
    """Why the step may zero the gradients itself: a framework-style ``x.optimizer_step(optimizer, ...)`` whose
    definitions in the project never call ``.step()`` on the optimizer they are given (OpenRLHF's strategy calls
    the DeepSpeed engine's ``model.step()``, which zeroes at each accumulation boundary)."""
    node = s.node
    if not (isinstance(node, ast.Call) and call_name(node) == "optimizer_step" and node.args):
        return ""
    defs = project_methods(file.path, "optimizer_step")
    if not defs:
        return ""
    for d in defs:
        params = [a.arg for a in d.args.posonlyargs + d.args.args]
        if params and params[0] in ("self", "cls"):
            params = params[1:]
        opt = params[0] if params else None
        if opt is None or any(isinstance(n, ast.Call) and call_name(n) == "step" and
                              isinstance(n.func, ast.Attribute) and dotted(n.func.value) == opt for n in walk(d)):
            return ""
    return (" (uncertain: the project's optimizer_step() never steps the optimizer it is given; it steps "
            "something else, such as a DeepSpeed engine, whose step() zeroes the gradients itself)")


_OPTIMIZER_NAME = re.compile(r"optim|^opt($|_|[A-Z0-9])|_opt$|^o?pt_?[gd]$", re.IGNORECASE)
_TORCH_OPTIMIZERS = {"SGD", "Adam", "AdamW", "Adamax", "Adagrad", "Adadelta", "RMSprop", "Rprop", "LBFGS", "NAdam",
                     "RAdam", "SparseAdam", "ASGD", "Adafactor", "ZeroRedundancyOptimizer", "FusedAdam", "LAMB",
                     "Lamb", "Lion", "AdamW8bit", "Adam8bit"}


def _optimizer_shown(file: FileModel, receiver: ast.AST | None) -> bool:
    """Positive evidence that ``receiver`` is a torch optimizer: its name says so (``optimizer``, ``optim_g``,
    ``self.opt``) or this file assigns it from an optimizer's constructor (``torch.optim.Adam(...)``)."""
    name = dotted(receiver) if receiver is not None else None
    if not name:
        return False
    if _OPTIMIZER_NAME.search(name.split(".")[-1]):
        return True
    for n in file.nodes:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(dotted(t) == name for t in n.targets):
            q = file.imports.qualname(n.value.func) or ""
            if q.startswith("torch.optim.") or call_name(n.value) in _TORCH_OPTIMIZERS:
                return True
    return False


def _not_an_optimizer(file: FileModel, s: Event) -> str:
    """Why the stepped object may zero its own gradients: it is not shown to be a torch optimizer (an engine,
    a wrapper, a framework's ``strategy.optimizer_step(...)``, ``model_engine.step()``), whose ``step()`` may call
    ``zero_grad()`` itself.  ``scaler.step(optimizer)`` counts the optimizer it is given."""
    node = s.node
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return ""
    if node.func.attr == "step" and _optimizer_shown(file, node.func.value):
        return ""
    if node.args and _optimizer_shown(file, node.args[0]) and node.func.attr == "step":
        return ""
    return (" (uncertain: the stepped object is not shown to be a torch optimizer (its name or a torch.optim "
            "constructor in this file); an engine or wrapper may zero the gradients in its own step())")


def _distributed_autograd(loop) -> bool:
    """The loop's backward is ``dist_autograd.backward(context_id, ...)``: gradients live in the RPC context."""
    backs = [e for e in loop.events if e.kind == BACKWARD]
    return bool(backs) and all(e.extra.get("distributed") for e in backs)


def _never_zeroed_helper(fm, s: Event) -> Iterator[Hit]:
    """A ``train_step()`` helper with backward + step, or an ``optimizer_step()`` helper called from a
    loop that runs the backward, with no zero_grad in the helper nor in its callers' loops."""
    if any(ZERO in e.kinds() for e in fm.events):
        return
    sites = [c for c in fm.call_sites() if c.loops]
    trains = bool(fm.kind_events(BACKWARD)) or all(train_loop(c) is c.loops[-1] for c in sites)
    if sites and trains and all(not _zeroes(c.fm, c.loops[-1], s) for c in sites):
        yield Hit(s.node, f"{fm.name}() steps the optimizer and its callers' loop never zeroes the gradients")
