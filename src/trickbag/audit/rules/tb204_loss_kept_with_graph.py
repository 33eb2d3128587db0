"""TB204 loss-kept-with-graph: A loss tensor is summed (or appended) across iterations without ``.item()`` /
``.detach()``.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import cast

from trickbag.audit import _roles as R
from trickbag.audit._ast import call_name, const_value, dotted, walk, walk_no_defs
from trickbag.audit._eval_facts import bound_args
from trickbag.audit._flow import (
    BACKWARD,
    STEP,
    FileModel,
    FunctionModel,
    Loop,
    steps_like,
)
from trickbag.audit._query import (
    has_kind,
    is_data_loop,
    loss_names,
    train_loop,
)
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _defined_before(fm: FunctionModel, name: str, loop: Loop) -> bool:
    if "." in name or "[]" in name:
        return True
    args = getattr(fm.node, "args", None)
    if args is not None and name in {a.arg for a in args.args + args.kwonlyargs + args.posonlyargs}:
        return True
    if any(name in a.names and a.node.lineno < loop.node.lineno  # type: ignore[attr-defined]  # statements
           for a in fm.assigns):
        return True
    return fm.node is not fm.file.tree and any(name in a.names for a in fm.file.module.assigns)  # a module global


_DETACHING = {"item", "detach", "tolist", "numpy", "float", "int", "round", "detach_"}


_PASS_THROUGH = {"sum", "mean", "clone", "cpu", "to", "view", "reshape", "squeeze"}

#: collectives that return their (differentiable) result: Horovod's ``allreduce``; torch's ``all_reduce`` works in
#: place and returns no tensor
_REDUCING = {"allreduce"}


def _keeps_graph(node: ast.AST, fm: FunctionModel, losses: set[str], before: int) -> str | None:
    """The loss whose graph ``node`` keeps alive (None if every use is detached).  Iterative: a
    1000-term sum does not reach the recursion limit."""
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.BinOp):
            todo += [n.right, n.left]
            continue
        if isinstance(n, ast.Subscript) and isinstance(n.value, (ast.Name, ast.Attribute)):
            todo.append(n.value)  # ``loss[key]`` of a dict of loss tensors
            continue
        if isinstance(n, (ast.List, ast.Tuple)):
            todo += reversed(n.elts)  # ``meter.update([coarse_loss * 1000, refine_loss * 1000])``
            continue
        if isinstance(n, ast.Call) and call_name(n) in _REDUCING and n.args:
            todo.append(n.args[0])  # ``hvd.allreduce(loss)`` returns a tensor on the same graph
            continue
        if isinstance(n, ast.Call) and call_name(n) not in _DETACHING and R.is_loss_value(n, fm.role) \
                and not _helper_returns_numbers(fm, n):
            return "the loss"
        if isinstance(n, (ast.Name, ast.Attribute)):
            found = _kept_name(n, fm, losses, before)
            if found:
                return found
        elif isinstance(n, ast.Call) and call_name(n) not in _DETACHING and isinstance(n.func, ast.Attribute) \
                and call_name(n) in _PASS_THROUGH:
            todo.append(n.func.value)
    return None


def _kept_name(node: ast.AST, fm: FunctionModel, losses: set[str], before: int) -> str | None:
    name = dotted(node)
    if (isinstance(node, ast.Attribute) and node.attr == "data") or name not in losses:
        return None
    last = fm.last_assignments(name, before)
    if last and _detached_chain(last[-1].value):
        return None  # loss = loss.item() (or loss.detach().cpu()) before the sum
    if last and _returns_numbers(fm, last[-1], name):
        return None  # ``loss, ec, dc = train(...)`` where train() returns ``loss.data[0], ...``
    return name


def _detached_chain(value: ast.AST | None) -> bool:
    """``x.item()``, ``x.detach().cpu()``, ``x.cpu().detach()``: a method chain with a detaching call in it."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if call_name(value) in _DETACHING:
            return True
        value = value.func.value
    return isinstance(value, ast.Call) and call_name(value) in _DETACHING


def _helper_returns_numbers(fm: FunctionModel, call: ast.Call) -> bool:
    """``eval_loss()`` where the file's (nested) ``def eval_loss(): return loss(...).mean().item()``: a number; so
    is one returning a local sum of numbers (``loss += crit(...).item()`` ... ``return loss / len(loader.dataset)``)."""
    helper = fm.file.resolve(call, fm)
    if helper is None:
        return False
    values = [r.value for r in helper.nodes if isinstance(r, ast.Return)]
    return bool(values) and all(v is not None and (_number_expr(v) or _numeric(helper, v)) for v in values)


def _number_expr(v: ast.AST) -> bool:
    """``x.item() / 2``: arithmetic on numbers read off tensors."""
    return isinstance(v, ast.BinOp) and any(_number(s) or _number_expr(s) for s in (v.left, v.right)) \
        and all(_number(s) or _number_expr(s) or isinstance(s, ast.Constant) for s in (v.left, v.right))


def _returns_numbers(fm: FunctionModel, assign, name: str) -> bool:
    """``name`` is bound from a call of a function of this file whose every ``return`` gives a Python number at that
    position (``loss.item()``, ``loss.data[0]``, ``float(loss)``), not a tensor."""
    call = assign.value
    helper = fm.file.resolve(call, fm) if isinstance(call, ast.Call) else None
    if helper is None:
        return False
    pos = assign.names.index(name)
    values: list[ast.AST] = []
    for r in (n for n in helper.nodes if isinstance(n, ast.Return) and n.value is not None):
        elts = r.value.elts if isinstance(r.value, ast.Tuple) else [r.value]
        if len(assign.names) > 1 and len(elts) != len(assign.names):
            return False
        values.append(elts[pos] if len(assign.names) > 1 else r.value)  # type: ignore[arg-type]  # not None here
    return bool(values) and all(_numeric(helper, v) for v in values)


def _numeric(helper: FunctionModel, v: ast.AST, depth: int = 0) -> bool:
    """``v`` is a Python number in ``helper``: a number read off a tensor (:func:`_number`), a constant, ``len(...)``,
    arithmetic on those, or a local name every assignment of which is one (``loss = 0`` then ``loss +=
    crit(...).item()``; ``return loss / len(loader.dataset)``)."""
    if _number(v) or (isinstance(v, ast.Constant) and isinstance(v.value, (int, float))):
        return True
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "len":
        return True
    if isinstance(v, ast.BinOp):
        return _numeric(helper, v.left, depth) and _numeric(helper, v.right, depth)
    if isinstance(v, ast.Name) and depth < 3:
        bound = [a for a in helper.assigns if v.id in a.names]
        return bool(bound) and all(a.names == [v.id] and a.value is not None and _numeric(helper, a.value, depth + 1)
                                   for a in bound)
    return False


def _number(v: ast.AST) -> bool:
    """``x.item()``, ``float(x)``, ``x.data[0]`` (torch 0.3's scalar), ``x.tolist()``."""
    if isinstance(v, ast.Call):
        return call_name(v) in ("item", "tolist") or (isinstance(v.func, ast.Name) and v.func.id in ("float", "int"))
    return isinstance(v, ast.Subscript) and isinstance(v.value, ast.Attribute) and v.value.attr == "data" \
        and isinstance(v.slice, ast.Constant) and v.slice.value == 0


def _accumulations(fm: FunctionModel, loop: Loop) -> Iterator[tuple[ast.AST, str, ast.AST, int]]:
    """(statement, accumulator name, added value, order) for ``acc += v``, ``acc = acc + v``, ``acc.append(v)``
    run with gradients enabled."""
    for a in fm.assigns:
        if loop not in a.loops or not a.names or a.value is None or fm.grad_disabled \
                or any(k == "nograd" for k, _ in a.contexts):
            continue
        added = _added(a)
        if added is not None:
            yield a.node, a.names[0], added, a.order


def _added(a) -> ast.AST | None:
    """The value ``a`` adds to its target: ``acc += v``, ``acc = acc + v``, ``d[k] = d.get(k, 0) + v``,
    ``acc.append(v)`` (None for any other assignment)."""
    target = a.names[0] if a.names else None
    if target is None or a.value is None:
        return None
    if a.op is not None and isinstance(a.op, ast.Add):
        return a.value
    value = a.value
    if a.op is None and isinstance(value, ast.IfExp):  # ``total = loss if total is None else total + loss``
        value = next((v for v in (value.orelse, value.body) if isinstance(v, ast.BinOp)
                      and isinstance(v.op, ast.Add) and dotted(v.left) == target), value)
    if a.op is None and isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        left = value.left
        if dotted(left) == target or (isinstance(left, ast.Call) and call_name(left) == "get"
                                      and isinstance(left.func, ast.Attribute)
                                      and f"{dotted(left.func.value)}[]" == target):
            return value.right
    return None


@rule("TB204", "loss-kept-with-graph", fix="accumulate loss.item() (or loss.detach()) for logging")
def loss_kept_with_graph(file: FileModel) -> Iterator[Hit]:
    """A loss tensor is summed (or appended) across iterations without ``.item()`` / ``.detach()``.

    ``total_loss += loss`` keeps a reference to the graph of every iteration (activations included):
    memory grows each step until the epoch ends or the GPU runs out — the classic "out of memory
    after N batches".  Accumulate ``loss.item()`` (or ``loss.detach()``) instead.  After that loss's own
    ``backward()`` its graph has already freed the saved activations: a sum restarted inside the loop (at every
    optimizer step) stays small and is not reported, nor a local sum started before the accumulation loop of one
    update (backward inside, the step after it); one never restarted grows a history all epoch long.  Nor is a
    list re-made on every batch of the data loop and filled by an inner loop over classifiers or heads (one
    back-propagated loss each, logged after): it holds this batch's losses only.  A value a
    call is told is not a loss (``loss_func(output, non_loss_data=True)``) is not a loss.  A step's
    output dict appended to a list (``outputs.append(output)``) after ``output["loss"].backward()``, its loss not
    replaced by ``output["loss"].detach()`` first, keeps every step's graph too.
    The spelled-out forms are the same: ``meters["loss"] = meters["loss"] + loss``,
    ``self.total = self.total + loss``, ``total = loss if total is None else total + loss``, and so is a dict of
    loss tensors summed key by key (``epoch_loss[k] += loss[k]``).

    So is ``sums[k] = sums.get(k, 0.0) + loss``, and a loss handed to a local helper or a method of a class of
    the file (``tracker.update("loss", loss)``) that adds it to an attribute, a container passed in or a
    module-level name (reported at the call): also inside a list (``meter.update([coarse_loss * 1000, ...])``
    summed item by item in a ``for`` loop of the method), after Horovod's ``hvd.allreduce(val)`` (it returns a
    tensor on the same graph), and from a loop-less step function run once per batch.  The loss terms a call
    returns beside the back-propagated loss (``loss, refine_loss = self.completion(x)``) are on its graph.  A loss
    reassigned detached before the sum (``loss_batch = loss_batch.detach().cpu()``, any method chain with a
    detaching call) is a number, and so is the value of a (nested) helper that returns ``....item()``
    (``ls.append(eval_loss())``).

    So is a loop-less helper or method called once per iteration of a training loop (``self.one_batch(x,
    y)``) that adds its own loss to an attribute, a module-level name or a container passed in; a step function
    or method of its own (backward and step, no loop) that the file never calls is taken to be one.  A function's own
    loop
    adding its loss to a module-level list or total (``loss_history.append(loss)``) is reported too.  A list the
    function back-propagates later (``loss_q = torch.stack(loss_all).sum(); loss_q.backward()``: a meta-batch of
    task losses) keeps its graphs on purpose and is not reported, nor a number a helper of the file returns
    (``loss, acc = train(...)`` where ``train`` returns ``loss.item()`` or torch 0.3's ``loss.data[0]``).

    A helper's return value made of numbers (``loss += crit(...).item()`` ... ``return loss / len(loader.dataset)``)
    is a number, whether assigned or appended (``val_losses.append(eval_loss(model, loader))``).  A list cut back
    inside the loop to a window of constant length (``loss_his = loss_his[-1:]``) holds a few iterations' graphs at
    most and is not reported.

    Wrong::

        total_loss = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total_loss += loss

    Right::

        total_loss = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
    """
    for fm in file.functions:
        losses = loss_names(fm)
        backed = _back_propagated(fm)
        for loop in fm.loops:
            if not has_kind(loop, BACKWARD):
                continue
            for node, target, value, order in _accumulations(fm, loop):
                kept = _keeps_graph(value, fm, losses, order)
                if kept and target != kept and target not in backed and target not in losses \
                        and _defined_before(fm, target, loop) and not _reset_in_loop(fm, target, loop, node):
                    if _backward_before(fm, kept, loop, order) and _reset_anywhere_in_loop(fm, target, loop):
                        continue  # backward() freed the graph's tensors; the sum restarts every update: bounded
                    if _one_update_of_micro_batches(fm, target, loop) or _reset_per_batch(fm, target, loop) \
                            or _cut_to_window(fm, target, loop):
                        continue
                    yield Hit(node, f"{target} accumulates {kept} with its autograd graph; every iteration's "
                                    f"graph stays in memory")
        yield from _helper_accumulations(fm, losses)
        yield from _per_iteration_helper_accumulations(fm, losses, backed)
        yield from _outputs_kept(fm)


def _outputs_kept(fm: FunctionModel) -> Iterator[Hit]:
    """``outputs.append(output)`` in the loop where ``output["loss"].backward()`` ran, with nothing in between
    replacing the dict's loss (``output["loss"] = output["loss"].detach()``): every step's graph is kept."""
    for b in fm.kind_events(BACKWARD):
        loss = b.extra.get("loss")
        if not (isinstance(loss, ast.Subscript) and isinstance(loss.value, ast.Name)) or not b.loops:
            continue
        holder, loop, at = loss.value.id, b.loops[-1], getattr(b.node, "lineno", 0)
        for n in walk_no_defs(loop.node):
            if isinstance(n, ast.Call) and call_name(n) == "append" and len(n.args) == 1 \
                    and isinstance(n.args[0], ast.Name) and n.args[0].id == holder and n.lineno > at \
                    and not _holder_rewritten(fm, holder, loop, at, n.lineno):
                yield Hit(n, f"{dotted(n.func) or 'append'}({holder}) keeps {holder}'s loss with its autograd graph "
                             f"(backpropagated at line {at}); every iteration's graph stays in memory")


def _holder_rewritten(fm: FunctionModel, holder: str, loop: Loop, start: int, end: int) -> bool:
    """``holder[...] = ...`` or ``holder = ...`` between the backward and the append."""
    for n in walk_no_defs(loop.node):
        if isinstance(n, ast.Assign) and start < n.lineno < end and any(
                dotted(t) == holder or (isinstance(t, ast.Subscript) and dotted(t.value) == holder)
                for t in n.targets):
            return True
    return False


def _called_per_training_step(fm: FunctionModel) -> bool:
    """``fm`` is a helper (``self.one_batch(x, y)``) called inside a loop that trains, grad enabled."""
    if fm.grad_disabled or fm.node is fm.file.tree:
        return False
    own = bool(fm.kind_events(BACKWARD))
    sites = fm.call_sites()
    if own and not sites and fm.kind_events(STEP):
        return True  # a step function of its own (backward + step) the file never calls: a per-step callback
    return any(site.loops and not site.grad_disabled and (own or train_loop(site) is not None)
               for site in fm.call_sites())


def _per_iteration_helper_accumulations(fm: FunctionModel, losses: set[str], backed: set[str]) -> Iterator[Hit]:
    """A loop-less helper computing a loss and adding it to a sum outliving the call (``self.losses.append(loss)``),
    called once per iteration of a training loop: every iteration's graph stays in memory."""
    if fm.loops or not losses or not _called_per_training_step(fm):
        return
    args = cast(ast.FunctionDef, fm.node).args  # a helper function (it has no loops and is called)
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    module_names = {n for a in fm.file.module.assigns for n in a.names}
    for a in fm.assigns:
        added = _added(a) if not a.loops and not any(k == "nograd" for k, _ in a.contexts) else None
        if added is None:
            continue
        target = a.names[0]
        base = target.split(".")[0].replace("[]", "")
        if not (target.startswith("self.") or base in params or base in module_names) or target in backed:
            continue
        kept = _keeps_graph(added, fm, losses, a.order)
        if kept and kept not in params and target != kept:
            yield Hit(a.node, f"{target} accumulates {kept} with its autograd graph at every call of "
                              f"{fm.name}() from the training loop; every iteration's graph stays in memory")


def _helper_accumulations(fm: FunctionModel, losses: set[str]) -> Iterator[Hit]:
    """A training loop hands a loss to a local helper (``tracker.update("loss", loss)``) that adds it to
    a sum outliving the call (``self.sums[name] = self.sums[name] + value``): reported at the call."""
    seen: set[int] = set()
    bodies = [getattr(loop.node, "body", []) for loop in fm.loops
              if not fm.grad_disabled and has_kind(loop, BACKWARD)]
    if not fm.loops and losses and _called_per_training_step(fm):
        bodies.append(_body(fm))  # ``train_step`` run once per batch: ``self.losses.update([loss * 1000])``
    for body in bodies:
        for call in (n for st in body for n in walk_no_defs(st) if isinstance(n, ast.Call)):
            if id(call) in seen:
                continue
            seen.add(id(call))
            helper = fm.file.resolve(call, fm) or _instance_method(fm, call)
            if helper is None or helper.grad_disabled:
                continue
            before = max((a.order for a in fm.assigns if a.node.lineno <= call.lineno),  # type: ignore[attr-defined]
                 default=0)
            for param, arg in bound_args(helper, call):
                kept = _keeps_graph(arg, fm, losses, before)
                target = _persistent_sum(helper, param) if kept else None
                if target:
                    yield Hit(call, f"{dotted(call.func) or helper.name}() adds {kept} to {target} with its "
                                    f"autograd graph; every iteration's graph stays in memory")
                    break


def _body(fm: FunctionModel) -> list[ast.stmt]:
    return cast(ast.FunctionDef, fm.node).body


def _instance_method(fm: FunctionModel, call: ast.Call) -> FunctionModel | None:
    """``tracker.update(...)`` where ``tracker = MetricTracker()`` (a class of this file): that method."""
    func = call.func
    recv = dotted(func.value) if isinstance(func, ast.Attribute) else None
    if not recv or not isinstance(func, ast.Attribute):  # recv is set for an attribute only
        return None
    scopes = [s for s in fm.file.functions if s is fm or s is fm.file.module or s is fm.parent
              or (recv.startswith("self.") and s.cls is not None and s.cls is fm.cls)]
    for scope in scopes:
        for a in scope.assigns:
            if a.names == [recv] and a.op is None and isinstance(a.value, ast.Call):
                cls = fm.file.imports.qualname(R.innermost_call(a.value) or a.value).split(".")[-1]
                if cls in fm.file.classes:
                    return fm.file.methods.get((cls, func.attr))
    return None


def _persistent_sum(helper: FunctionModel, param: str) -> str | None:
    """The sum outliving a call of ``helper`` that the parameter ``param`` is added to, with its graph:
    an attribute (``self.total``), a container passed in, or a module-level name."""
    args = cast(ast.FunctionDef, helper.node).args  # a local function or method
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {param}
    file = helper.file
    module_names = file.memo("module_names", lambda: {n for a in file.module.assigns for n in a.names})
    backed = file.memo("all_backed", lambda: {n for f in file.functions for b in f.kind_events(BACKWARD)
                                              for n in _names(b.extra.get("loss"))})
    values = {param} | _iterated(helper, param)
    for a in helper.assigns:
        added = _added(a) if not any(k == "nograd" for k, _ in a.contexts) else None
        if added is None:
            continue
        target = a.names[0]
        base = target.split(".")[0].replace("[]", "")
        if (target.startswith("self.") or base in params or base in module_names) and target not in backed \
                and _keeps_graph(added, helper, values, a.order):
            return target
    return None


def _iterated(helper: FunctionModel, param: str) -> set[str]:
    """The names a ``for`` loop of ``helper`` binds to the items of its parameter ``param``: ``v`` of ``for v in
    values``, ``for i, v in enumerate(values)``, ``for k, v in values.items()``."""
    out: set[str] = set()
    for loop in helper.loops:
        it, target = getattr(loop.node, "iter", None), getattr(loop.node, "target", None)
        if it is None or target is None:
            continue
        if isinstance(it, ast.Call) and (call_name(it) in ("enumerate", "items", "values") or
                                         (isinstance(it.func, ast.Attribute) and call_name(it) == "items")):
            base = it.args[0] if it.args and call_name(it) == "enumerate" else \
                (it.func.value if isinstance(it.func, ast.Attribute) else None)
            if dotted(base) == param and isinstance(target, ast.Tuple) and target.elts:
                out |= {d for d in [dotted(target.elts[-1])] if d}
        elif dotted(it) == param:
            out |= {d for n in walk(target) if isinstance(n, ast.Name) and (d := dotted(n))}
    return out


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {d for n in walk(node) if isinstance(n, (ast.Name, ast.Attribute)) and (d := dotted(n))}


def _back_propagated(fm: FunctionModel) -> set[str]:
    """The names a backward of the function back-propagates, and the names they are made from (``loss_q =
    torch.stack(loss_all).sum(); loss_q.backward()``: ``loss_all`` keeps its graphs to be back-propagated together,
    MAML's meta-batch), two assignments deep."""
    names = {n for b in fm.kind_events(BACKWARD) for n in _names(b.extra.get("loss"))}
    for _ in range(2):
        names |= {n for a in fm.assigns if set(a.names) & names and a.op is None for n in _names(a.value)}
    return names


def _backward_before(fm: FunctionModel, kept: str, loop: Loop, order: int) -> bool:
    """``kept.backward()`` (or a backward of an expression naming it) ran earlier in the same iteration."""
    return any(b.order < order and loop in b.loops and kept in _names(b.extra.get("loss"))
               for b in fm.kind_events(BACKWARD))


def _one_update_of_micro_batches(fm: FunctionModel, target: str, loop: Loop) -> bool:
    """The loop is the accumulation loop of one optimizer update: it back-propagates, steps nowhere inside, and the
    function steps after it; the sum is a local name started before the loop in this function.  It lives over the
    micro-batches of one update, whose backward already freed the saved tensors of their graphs: bounded."""
    if loop.parent is not None or "." in target or "[" in target or any(steps_like(e) for e in loop.events):
        return False
    end = getattr(loop.node, "end_lineno", 0) or 0
    after = [e for e in fm.events if steps_like(e) and getattr(e.node, "lineno", 0) > end and not e.loops]
    started = [a for a in fm.assigns if target in a.names and a.op is None and not a.loops
               and getattr(a.node, "lineno", 0) < loop.node.lineno]  # type: ignore[attr-defined]  # a statement
    return bool(after) and bool(started)


def _reset_per_batch(fm: FunctionModel, target: str, loop: Loop) -> bool:
    """``losses = []`` re-made in the enclosing data loop, filled by an inner ``for`` loop over no data (one loss per
    classifier or per view of this batch): it holds this batch's losses only, never a history."""
    outer = loop.parent
    if outer is None or getattr(loop.node, "iter", None) is None or is_data_loop(loop) or not is_data_loop(outer):
        return False
    start = loop.node.lineno  # type: ignore[attr-defined]  # a statement
    return any(target in a.names and a.op is None and outer in a.loops and loop not in a.loops
               and getattr(a.node, "lineno", 0) < start and not _names(a.value) for a in fm.assigns)


def _reset_anywhere_in_loop(fm: FunctionModel, target: str, loop: Loop) -> bool:
    """``acc = 0`` somewhere inside the loop (``if step % accum == 0: ...; running_loss = 0``)."""
    return any(target in a.names and a.op is None and loop in a.loops and target not in _names(a.value)
               and not _names(a.value) & loss_names(fm) for a in fm.assigns)


def _cut_to_window(fm: FunctionModel, target: str, loop: Loop) -> bool:
    """``loss_his = loss_his[-1:]`` inside the loop: the list is cut back to a window of constant length (SSLRec's
    reward over the last losses), so it holds a few iterations' graphs at most, never the epoch's history."""
    for a in fm.assigns:
        value = a.value
        if target in a.names and a.op is None and loop in a.loops and isinstance(value, ast.Subscript) \
                and dotted(value.value) == target and isinstance(value.slice, ast.Slice) and value.slice.step is None:
            lower, upper = value.slice.lower, value.slice.upper
            low, up = const_value(lower) if lower else None, const_value(upper) if upper else None
            if (lower is not None and upper is None and isinstance(low, int) and low < 0) \
                    or (lower is None and isinstance(up, int) and up >= 0):  # ``x[-k:]``, ``x[:k]``
                return True
    return False


def _reset_in_loop(fm: FunctionModel, target: str, loop: Loop, node: ast.AST) -> bool:
    """``acc = 0`` inside the loop (before the accumulation): a per-iteration sum, not a leak."""
    return any(target in a.names and a.op is None and loop in a.loops and a.node is not node
               and a.node.lineno < getattr(node, "lineno", 0)  # type: ignore[attr-defined]  # a statement
               for a in fm.assigns)
