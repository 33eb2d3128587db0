"""TB111 no-sync-every-micro-batch: Every backward of a DDP loop runs under ``model.no_sync()``.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

from trickbag.audit._ast import call_name, const_value, dotted, walk
from trickbag.audit._flow import (
    BACKWARD,
    FORWARD,
    STEP,
    FileModel,
    FunctionModel,
)
from trickbag.audit._query import loops_of, train_loop
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



@rule("TB111", "no-sync-every-micro-batch",
      fix="use no_sync() on all micro-batches but the last one before optimizer.step()")
def no_sync_every_micro_batch(file: FileModel) -> Iterator[Hit]:
    """Every backward of a DDP loop runs under ``model.no_sync()``.

    ``no_sync()`` skips the gradient all-reduce.  It belongs on the micro-batches *before* the last
    one of an accumulated update; if every backward runs under it, the processes never average their
    gradients and the replicas drift apart.  The same goes for the micro-batch that steps: a ``no_sync()`` chosen
    by a counter test that holds on it (``model.no_sync if i % k != 0 else nullcontext`` while the step tests
    ``(i + 1) % k == 0``: off by one) updates each replica with its own gradients.  Both tests may sit in helper
    methods of the file (``with self._sync_context(i):`` returning ``self.model.no_sync()`` under ``i % k != 0``,
    ``if self._should_step(i):`` returning ``(i + 1) % k == 0``): they are read with the caller's arguments.  A
    ``no_sync()`` block that holds the backward but not the forward of the same model does not stop the all-reduce
    (DDP sets it up in the forward): reported at the ``no_sync()``.

    Wrong::

        for i, (x, y) in enumerate(loader):
            with model.no_sync():
                (loss_fn(model(x), y) / accum).backward()
            if (i + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()

    Right::

        for i, (x, y) in enumerate(loader):
            last = (i + 1) % accum == 0
            with model.no_sync() if not last else contextlib.nullcontext():
                (loss_fn(model(x), y) / accum).backward()
            if last:
                optimizer.step()
                optimizer.zero_grad()
    """
    for _fm, loop in loops_of(file):
        if not any(s.kind == STEP and train_loop(s) is loop for s in loop.events):
            continue
        backs = [b for b in loop.events if b.kind == BACKWARD]
        ctxs = [b.in_context("no_sync") for b in backs]
        if ctxs and ctxs[0] is not None and all(c is not None for c in ctxs):
            yield Hit(ctxs[0], "every backward() runs under no_sync(): the gradients are "
                                                      "never all-reduced across processes")
        elif (bad := _no_sync_on_stepping_batch(_fm, loop)) is not None:
            yield Hit(bad, "no_sync() is chosen on the micro-batch that steps the optimizer: its gradients are not "
                           "all-reduced before the update (the counter test is off by one from the update test)")
    yield from _forward_outside_no_sync(file)


def _forward_outside_no_sync(file: FileModel) -> Iterator[Hit]:
    """``with model.no_sync(): loss.backward()`` where ``loss`` came from a forward of ``model`` outside the block:
    DDP decides at the forward whether the backward all-reduces, so the gradients are still synchronised (and the
    saving ``no_sync`` was meant for is lost)."""
    for fm in file.functions:
        for b in fm.kind_events(BACKWARD):
            ctx = b.in_context("no_sync")
            if not (isinstance(ctx, ast.Call) and isinstance(ctx.func, ast.Attribute)):
                continue
            model = dotted(ctx.func.value)
            fwds = [f for f in fm.kind_events(FORWARD) if f.recv == model and f.order < b.order and b.loops
                    and f.loops[:len(b.loops)] == b.loops[:len(f.loops)]]
            if fwds and all(f.in_context("no_sync") is not ctx for f in fwds):
                yield Hit(ctx, f"the forward of {model} runs outside {model}.no_sync(), only its backward inside: DDP "
                               f"all-reduces the gradients anyway (put the forward inside the no_sync block)")


def _residue_test(test: ast.AST) -> tuple[str, str, int, int, bool] | None:
    """``(i + a) % k == b`` (or ``!=``, ``i % k``, ``k`` any name) as (counter, modulus, a, b, equal)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))
            and isinstance(test.left, ast.BinOp) and isinstance(test.left.op, ast.Mod)):
        return None
    b = const_value(test.comparators[0])
    mod, num = dotted(test.left.right), test.left.left
    offset = 0
    shift = const_value(num.right) if isinstance(num, ast.BinOp) else None
    if isinstance(num, ast.BinOp) and isinstance(num.op, (ast.Add, ast.Sub)) and isinstance(shift, int):
        offset = shift * (1 if isinstance(num.op, ast.Add) else -1)
        num = num.left
    counter = dotted(num)
    if counter is None or mod is None or not isinstance(b, int) or isinstance(b, bool):
        return None
    return counter, mod, offset, b, isinstance(test.ops[0], ast.Eq)


def _is_no_sync(e: ast.AST | None) -> bool:
    return (isinstance(e, ast.Call) and call_name(e) == "no_sync") or \
        (isinstance(e, ast.Attribute) and e.attr == "no_sync")


class _Substitute(ast.NodeTransformer):
    """A helper's parameters replaced by the caller's arguments (``batch_idx`` -> ``i``)."""

    def __init__(self, names: dict[str, ast.AST]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return copy.deepcopy(self.names[node.id]) if node.id in self.names else node


def _helper_of(fm: FunctionModel, call: ast.AST) -> tuple[ast.FunctionDef, dict[str, ast.AST]] | None:
    """The method or function of this file a call runs (``self._sync_context(i)``), with its parameters bound to
    the call's arguments."""
    if not isinstance(call, ast.Call):
        return None
    helper = fm.file.resolve(call, fm)
    node = helper.node if helper is not None else None
    if not isinstance(node, ast.FunctionDef):
        return None
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    bound: dict[str, ast.AST] = dict(zip(params, call.args))
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    return node, bound


def _inlined_test(fm: FunctionModel, test: ast.AST) -> ast.AST:
    """``if self._should_step(i):`` -> the helper's returned test with the caller's arguments
    (``(i + 1) % self.accum == 0``); the test itself otherwise."""
    found = _helper_of(fm, test)
    if found is None:
        return test
    node, bound = found
    returns = [r.value for r in walk(node) if isinstance(r, ast.Return) and r.value is not None]
    if len(returns) != 1:
        return test
    return _Substitute(bound).visit(copy.deepcopy(returns[0]))


def _helper_choice(fm: FunctionModel, call: ast.AST) -> tuple[ast.AST, bool] | None:
    """``with self._sync_context(i):`` where the helper returns ``model.no_sync()`` under a test (``if i % k != 0:
    return self.model.no_sync()`` then ``return nullcontext()``, or a conditional expression)."""
    found = _helper_of(fm, call)
    if found is None:
        return None
    node, bound = found
    body = [st for st in node.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    choice: tuple[ast.AST, bool] | None = None
    if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.IfExp):
        e = body[0].value
        if _is_no_sync(e.body) != _is_no_sync(e.orelse):
            choice = (e.test, _is_no_sync(e.body))
    elif len(body) >= 2 and isinstance(body[0], ast.If) and isinstance(body[-1], ast.Return):
        first = body[0]
        inner = first.body[-1] if first.body else None
        if isinstance(inner, ast.Return) and _is_no_sync(inner.value) != _is_no_sync(body[-1].value):
            choice = (first.test, _is_no_sync(inner.value))
    if choice is None:
        return None
    return _Substitute(bound).visit(copy.deepcopy(choice[0])), choice[1]


def _no_sync_choice(fm: FunctionModel, expr: ast.AST) -> tuple[ast.AST, bool] | None:
    """``model.no_sync() if cond else nullcontext()`` (directly, or called through a name assigned the
    conditional ``model.no_sync if cond else nullcontext``, or returned by a helper method of the file):
    (cond, whether no_sync is the branch taken when cond holds)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        values = [a.value for a in fm.assigns if a.names == [expr.func.id] and a.op is None and a.value is not None]
        expr = values[-1] if values else expr
    if not isinstance(expr, ast.IfExp):
        return _helper_choice(fm, expr)
    if _is_no_sync(expr.body) != _is_no_sync(expr.orelse):
        return expr.test, _is_no_sync(expr.body)
    return None


def _no_sync_on_stepping_batch(fm: FunctionModel, loop) -> ast.AST | None:
    """The ``with`` item whose ``no_sync()`` is chosen by a counter test that holds on the micro-batch that steps
    (``batch_idx % k != 0`` while the step tests ``(batch_idx + 1) % k == 0``)."""
    acc = fm.accumulation(loop)
    guard = acc.guard if acc is not None else None
    step_test = _residue_test(guard.node.test) if guard is not None and guard.branch else None
    if step_test is None:  # the update test behind a helper: ``if self._should_step(i): optimizer.step()``
        for s in loop.events:
            if s.kind == STEP and train_loop(s) is loop and s.guards:
                g = s.guards[-1]
                inlined = _residue_test(_inlined_test(fm, g.node.test)) if g.branch else None
                step_test = inlined or step_test
    if step_test is None or not step_test[4]:
        return None
    counter, mod, a_s, b_s, _ = step_test
    for st in (n for n in walk(loop.node) if isinstance(n, ast.With)):
        for item in st.items:
            choice = _no_sync_choice(fm, item.context_expr)
            if choice is None:
                continue
            test, when = choice
            terms = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and when else [test]
            for t in terms:
                r = _residue_test(t)
                if r is None or r[:2] != (counter, mod):
                    continue
                congruent = (b_s - a_s + r[2] - r[3]) == 0
                if (congruent == r[4]) == when:  # the test picks no_sync on the stepping micro-batch
                    return item.context_expr
    return None
