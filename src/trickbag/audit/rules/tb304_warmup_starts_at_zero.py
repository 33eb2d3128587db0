"""TB304 warmup-starts-at-zero: A warm-up schedule whose learning rate is 0 at step 0.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Iterator
from typing import TypeGuard

from trickbag.audit._ast import call_name, dotted, walk
from trickbag.audit._flow import FileModel, FunctionModel, returned_nested
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



# --------------------------------------------------------------------------- warm-up that starts at 0
class _Positive:
    """An unknown value assumed > 0 (``warmup_steps``, ``args.warmup``)."""


POS = _Positive()
Value = float | _Positive | None


def _num(v: object) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _pos(v: Value) -> bool:
    return v is POS or (_num(v) and v > 0)


def _binop(op: ast.operator, a: Value, b: Value) -> Value:
    """``a op b`` where either side may be a positive unknown; None when the sign is unknown."""
    if a is None or b is None:
        return None
    if _num(a) and _num(b):
        try:
            return float(_ARITH[type(op)](a, b))
        except (KeyError, ArithmeticError):
            return None
    a_zero, b_zero = _num(a) and a == 0, _num(b) and b == 0
    if isinstance(op, (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)) and a_zero and _pos(b):
        return 0.0
    if isinstance(op, ast.Mult) and b_zero:
        return 0.0
    if isinstance(op, (ast.Add, ast.Sub)) and b_zero:
        return a
    if isinstance(op, ast.Add):
        return b if a_zero else POS if _pos(a) and _pos(b) else None
    if isinstance(op, (ast.Mult, ast.Div)) and _pos(a) and _pos(b):
        return POS
    if isinstance(op, ast.Pow) and _pos(a) and (_num(b) or b is POS):
        return POS  # a positive base to any real power: ``d_model ** -0.5``
    return None


def _compare(op: ast.cmpop, a: Value, b: Value) -> bool | None:
    if _num(a) and _num(b):
        return {ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b, ast.Eq: a == b,
                ast.NotEq: a != b}.get(type(op))
    if _num(a) and a <= 0 and b is POS:
        return {ast.Lt: True, ast.LtE: True, ast.Gt: False, ast.GtE: False, ast.Eq: False, ast.NotEq: True}.get(
            type(op)
        )
    if a is POS and _num(b) and b <= 0:
        return {ast.Lt: False, ast.LtE: False, ast.Gt: True, ast.GtE: True, ast.Eq: False, ast.NotEq: True}.get(
            type(op)
        )
    return None


def _value(node: ast.AST, env: dict[str, Value], depth: int = 0) -> Value:
    """The value of ``node`` when the step argument is 0 (numbers, POS, or None when unknown; None too
    beyond 100 levels of nesting)."""
    if depth > 100:
        return None
    if isinstance(node, ast.Constant):
        return float(node.value) if _num(node.value) else None
    if isinstance(node, ast.Name):
        return env.get(node.id, POS)
    if isinstance(node, ast.Attribute):
        return env.get(dotted(node) or "", POS)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # ``-0.5`` in ``d_model ** -0.5``
        v = _value(node.operand, env, depth + 1)
        return -v if _num(v) else None
    if isinstance(node, ast.BinOp):
        return _binop(node.op, _value(node.left, env, depth + 1), _value(node.right, env, depth + 1))
    if isinstance(node, ast.IfExp):
        test = _truth(node.test, env, depth + 1)
        return None if test is None else _value(node.body if test else node.orelse, env, depth + 1)
    if isinstance(node, ast.Call):
        return _call_value(node, env, depth + 1)
    return None


def _call_value(node: ast.Call, env: dict[str, Value], depth: int = 0) -> Value:
    name = call_name(node)
    args = [_value(a, env, depth) for a in node.args]
    if name == "float" and len(args) == 1:
        return args[0]
    if name in ("min", "max") and args and not node.keywords:
        nums = [a for a in args if _num(a)]
        if name == "min" and any(a == 0 for a in nums) and all(_nonneg(n, env, depth) for n in node.args):
            return 0.0  # min(0, anything >= 0), e.g. ``min(step / warmup, 0.5 * (1 + cos(...)))``
        if None in args:
            return None
        if name == "min":
            return min(nums) if len(nums) == len(args) else (POS if all(_pos_or_gt0(a) for a in args) else None)
        if any(_pos_or_gt0(a) for a in args):
            return max(nums) if len(nums) == len(args) else POS
        return max(nums) if nums else None
    return None


def _pos_or_gt0(a: Value) -> bool:
    """``a is POS or a > 0`` for a value known not to be None."""
    return isinstance(a, _Positive) or (a is not None and a > 0)


_BOUNDED = {"cos", "sin", "tanh"}  # |f(x)| <= 1
_NONNEG_CALLS = {"exp", "sqrt", "abs", "fabs", "float"}


def _bound(node: ast.AST, env: dict[str, Value], depth: int) -> float | None:
    """A bound on ``abs(node)``: ``cos(x)`` -> 1, ``0.5 * cos(x)`` -> 0.5; None when unbounded or unknown."""
    if isinstance(node, ast.Call) and call_name(node) in _BOUNDED:
        return 1.0
    v = _value(node, env, depth + 1)
    if _num(v):
        return abs(v)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
        a, b = _bound(node.left, env, depth + 1), _bound(node.right, env, depth + 1)
        if a is not None and b is not None:
            return a * b if isinstance(node.op, ast.Mult) else a + b
    return None


def _nonneg(node: ast.AST, env: dict[str, Value], depth: int = 0) -> bool:
    """Is ``node`` provably >= 0 at step 0: numbers >= 0, positive unknowns, ``exp``/``sqrt``/``abs``, squares,
    ``c + cos(x)`` with c >= 1 (a cosine decay), and sums, products and quotients of such."""
    v = _value(node, env, depth + 1)
    if v is POS or (_num(v) and v >= 0) or depth > 50:
        return v is not None and depth <= 50
    if isinstance(node, ast.Call):
        name, args = call_name(node), node.args
        if name in _NONNEG_CALLS and len(args) == 1:
            return name != "float" or _nonneg(args[0], env, depth + 1)
        return name in ("max", "min") and bool(args) and (any if name == "max" else all)(
            _nonneg(a, env, depth + 1) for a in args)
    if isinstance(node, ast.IfExp):
        return _nonneg(node.body, env, depth + 1) and _nonneg(node.orelse, env, depth + 1)
    if not isinstance(node, ast.BinOp):
        return False
    left, right = node.left, node.right
    if isinstance(node.op, ast.Pow):
        return (isinstance(right, ast.Constant) and right.value in (2, 2.0)) or _nonneg(left, env, depth + 1)
    if isinstance(node.op, (ast.Add, ast.Sub)):
        lv, b = _value(left, env, depth + 1), _bound(right, env, depth)
        if _num(lv) and b is not None and lv >= b:
            return True  # ``1 + cos(x)``, ``1 - 0.5 * cos(x)``
    if isinstance(node.op, (ast.Add, ast.Mult, ast.Div)):
        return _nonneg(left, env, depth + 1) and _nonneg(right, env, depth + 1)
    return False


def _truth(test: ast.AST, env: dict[str, Value], depth: int = 0) -> bool | None:
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _compare(test.ops[0], _value(test.left, env, depth), _value(test.comparators[0], env, depth))
    return None


def _run_body(body: list[ast.stmt], env: dict[str, Value]) -> tuple[Value, ast.AST | None]:
    """Run a small lr_lambda body at step 0: (returned value, the return statement)."""
    for st in body:
        if isinstance(st, ast.Return) and st.value is not None:
            return _value(st.value, env), st
        if isinstance(st, ast.If):
            truth = _truth(st.test, env)
            if truth is None:
                return None, None
            value, ret = _run_body(st.body if truth else st.orelse, env)
            if ret is not None or value is not None:
                return value, ret
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            env = {**env, st.targets[0].id: _value(st.value, env)}
        elif not isinstance(st, (ast.Expr, ast.Pass)):
            return None, None
    return None, None


def _constants(fm: FunctionModel) -> dict[str, Value]:
    env: dict[str, Value] = {}
    for scope in (fm.file.module, fm):
        for a in scope.assigns:
            if len(a.names) == 1 and a.value is not None and a.op is None:
                v = _value(a.value, env)
                env[a.names[0]] = v if _num(v) else POS
    return env


def _lambdas(fm: FunctionModel, node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            yield from _lambdas(fm, e)
    elif isinstance(node, ast.Lambda):
        yield node
    elif isinstance(node, ast.Call) and _is_partial(fm, node):  # ``partial(_lr_lambda, num_warmup_steps=500)``
        if len(node.args) == 1:  # keyword-bound only: the step is still the first positional parameter
            yield from _lambdas(fm, node.args[0])
    elif isinstance(node, ast.Call) and (product := _factory_function(fm, node)) is not None:
        yield product  # ``noam(cfg)`` returning its nested ``def f(step)`` (or a lambda)
    elif isinstance(node, ast.Call):  # ``LinearWarmup(warmup)``: an instance of a class with ``__call__``
        cls = fm.file.imports.qualname(node.func).split(".")[-1]
        method = fm.file.methods.get((cls, "__call__")) if cls in fm.file.classes else None
        if method is not None:
            yield method.node
    elif isinstance(node, ast.Attribute) and dotted(node) == f"self.{node.attr}" and fm.cls is not None:
        method = fm.file.methods.get((fm.cls.name, node.attr))  # a bound method: ``LambdaLR(opt, self._factor)``
        if method is not None:
            yield method.node
    elif isinstance(node, ast.Name):
        helper = fm.nested.get(node.id) or fm.file.top.get(node.id)
        if helper is not None:
            yield helper.node
        for a in fm.assigns + fm.file.module.assigns:
            if node.id in a.names and isinstance(a.value, ast.Lambda):
                yield a.value
            elif a.names == [node.id] and isinstance(a.value, ast.Call) and a.op is None:
                yield from _lambdas(fm, a.value)


def _factory_function(fm: FunctionModel, call: ast.Call) -> ast.AST | None:
    """The function a local factory call returns: its nested def returned by name, or a returned lambda."""
    factory = fm.file.resolve(call, fm)
    if factory is None:
        return None
    nested = returned_nested(factory)
    if nested is not None:
        return nested.node
    return next((n.value for n in factory.nodes if isinstance(n, ast.Return) and isinstance(n.value, ast.Lambda)),
                None)


def _is_partial(fm: FunctionModel, call: ast.Call) -> bool:
    return call_name(call) == "partial" and fm.file.imports.qualname(call.func) in ("functools.partial", "partial")


@rule("TB304", "warmup-starts-at-zero", fix="make the factor non-zero at step 0, e.g. (step + 1) / warmup_steps")
def warmup_starts_at_zero(file: FileModel) -> Iterator[Hit]:
    """A warm-up schedule whose learning rate is 0 at step 0.

    ``LambdaLR`` sets the learning rate to ``base_lr * lr_lambda(step)`` starting with step 0.  With
    ``lambda step: step / warmup`` the first update is done with learning rate 0 (a wasted step;
    with Adam the moment estimates still absorb that batch), and a one-step warm-up never trains.

    The factor may be a lambda, a function, or an instance of a class of the file with a ``__call__`` method
    (``LambdaLR(opt, LinearWarmup(warmup))``), or ``functools.partial(fn, warmup=...)`` binding keywords only
    (the Hugging Face ``get_*_schedule_with_warmup`` shape), or what a factory of the file returns
    (``LambdaLR(opt, noam(cfg))`` where ``noam`` returns its nested ``def f(step)`` or a lambda), or a bound
    method of the class (``LambdaLR(self.opt, self._factor)``, ``self`` skipped).

    ``min(step / warmup, decay)`` is 0 too when the decay is provably >= 0 (``0.5 * (1 + cos(...))``,
    ``exp(...)``, a square), and so is 0 scaled by a positive factor (the Noam schedule
    ``d_model ** -0.5 * min(step ** -0.5 if step > 0 else 0.0, step * warmup ** -1.5)``).

    A hand-written schedule counts too: a function of the file whose result is set into the optimizer's
    ``param_groups[...]["lr"]`` (directly or through a name: ``lr = get_lr(it)``), called with a count that is 0
    on the first iteration (``for it in range(n)``, ``enumerate(...)``, or ``it = 0`` incremented in the loop),
    and returning 0 for it (``return learning_rate * it / warmup_iters``).  So does a hand-written schedule
    class with its own step count (``self.step_num = 0`` in ``__init__``, ``self.step_num += 1`` in ``step()``)
    whose ``step()`` sets ``param_groups[...]["lr"]`` from the count before incrementing it, to 0.

    Wrong::

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, step / warmup_steps))

    Right::

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup_steps))
    """
    for fm in file.functions:
        for call in (n for n in fm.nodes if isinstance(n, ast.Call) and "LambdaLR" in
                     (call_name(n), file.imports.qualname(n.func).split(".")[-1])):
            fn = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords
                                                                 if k.arg == "lr_lambda"), None)
            for lam in (_lambdas(fm, fn) if fn is not None else ()):
                hit = _zero_at_start(fm, lam)
                if hit is not None:
                    yield Hit(hit, "the warm-up factor is 0 at step 0: the first update uses learning rate 0")
    seen: set[int] = set()
    for helper in _manual_schedules(file):
        hit = _zero_at_start(helper, helper.node) if id(helper) not in seen else None
        seen.add(id(helper))
        if hit is not None:
            yield Hit(hit, "the learning rate this function returns is 0 at iteration 0, and it is set into the "
                           "optimizer's param_groups from iteration 0: the first update uses learning rate 0")
    for hit in _schedule_classes(file):
        yield Hit(hit, "this schedule sets the learning rate from its own step count while the count is still 0: "
                       "the first update after its first step() uses learning rate 0")


def _counters(cls: ast.ClassDef) -> set[str]:
    """``self.<name>`` set to 0 in ``__init__`` and incremented in another method: a schedule's own step count."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return set()
    zero = {dotted(t) for n in walk(init) if isinstance(n, ast.Assign) and _const(n.value) == 0
            for t in n.targets if (dotted(t) or "").startswith("self.")}
    bumped = {dotted(n.target) for m in cls.body if isinstance(m, ast.FunctionDef) and m.name != "__init__"
              for n in walk(m) if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add)}
    return {c for c in zero & bumped if c}


def _sets_lr(st: ast.AST) -> ast.AST | None:
    """The value of ``group["lr"] = value`` (a param group's learning rate)."""
    if isinstance(st, ast.Assign) and any(isinstance(t, ast.Subscript) and _const(t.slice) == "lr"
                                          for t in st.targets):
        return st.value
    return None


def _class_first_step(fm: FunctionModel, method: ast.FunctionDef, counters: set[str]) -> ast.AST | None:
    """Run a schedule method's statements with its counters at 0 until one is incremented: the assignment that
    sets a param group's learning rate to 0 on the first call, or None."""
    env: dict[str, Value] = {**_constants(fm), **{c: 0.0 for c in counters}}

    def run(body: list[ast.stmt]) -> ast.AST | None | bool:
        nonlocal env
        for st in body:
            if isinstance(st, ast.AugAssign) and dotted(st.target) in counters:
                return False  # counted before it is used: no zero step
            value = _sets_lr(st)
            if value is not None:
                v = _value(value, env)
                return st if _num(v) and math.isclose(v, 0.0, abs_tol=0.0) else False
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                env = {**env, st.targets[0].id: _value(st.value, env)}
            elif isinstance(st, ast.If):
                truth = _truth(st.test, env)
                if truth is None:
                    return False
                out = run(st.body if truth else st.orelse)
                if out is not None:
                    return out
            elif isinstance(st, (ast.For, ast.AsyncFor)):
                out = run(st.body)
                if out is not None:
                    return out
            elif not isinstance(st, (ast.Expr, ast.Pass, ast.Assign, ast.AnnAssign)):
                return False
        return None

    found = run(method.body)
    return found if isinstance(found, ast.AST) else None


def _schedule_classes(file: FileModel) -> Iterator[ast.AST]:
    """A hand-written schedule class with its own step count (``self.step_num = 0`` in ``__init__``, ``+= 1`` in
    ``step()``) whose step sets the optimizer's learning rate from the count before incrementing it, and is 0
    there: the update after its first call runs at learning rate 0."""
    for cls in file.classes.values():
        counters = _counters(cls)
        if not counters:
            continue
        for m in cls.body:
            if isinstance(m, ast.FunctionDef) and m.name != "__init__":
                fm = file.methods.get((cls.name, m.name))
                hit = _class_first_step(fm, m, counters) if fm is not None else None
                if hit is not None:
                    yield hit


def _manual_schedules(file: FileModel) -> Iterator[FunctionModel]:
    """Functions of this file whose result is set as the learning rate (``g["lr"] = get_lr(it)``, or through a
    name: ``lr = get_lr(it)``) with a first argument that is 0 on the first iteration."""
    for fm in file.functions:
        for n in fm.nodes:
            if not (isinstance(n, ast.Assign) and any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
                                                      and t.slice.value == "lr" for t in n.targets)):
                continue
            calls = [c for c in walk(n.value) if isinstance(c, ast.Call)]
            for name in (d for m in walk(n.value) if isinstance(m, ast.Name) and (d := m.id)):
                calls += [a.value for a in fm.assigns if a.names == [name] and isinstance(a.value, ast.Call)]
            for c in calls:
                helper = file.resolve(c, fm)
                if helper is not None and c.args and _zero_first(fm, c.args[0]):
                    yield helper


def _zero_first(fm: FunctionModel, arg: ast.AST) -> bool:
    """``arg`` is 0 on the first iteration: the index of ``for it in range(n)`` / ``enumerate(...)``, or a count
    set to 0 before the loop (``iter_num = 0``) that the loop increments."""
    name = dotted(arg)
    if not isinstance(arg, ast.Name) or name is None:
        return False
    for loop in fm.loops:
        node = loop.node
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.iter, ast.Call):
            first = node.target.elts[0] if isinstance(node.target, ast.Tuple) and node.target.elts else node.target
            it = node.iter
            if isinstance(first, ast.Name) and first.id == name and (
                    (call_name(it) == "range" and (len(it.args) == 1 or _const(it.args[0]) == 0))
                    or (call_name(it) == "enumerate" and not it.keywords and len(it.args) == 1)):
                return True
    inits = [a for scope in (fm, fm.file.module) for a in scope.assigns if a.names == [name] and a.op is None]
    bumped = any(a.names == [name] and isinstance(a.op, ast.Add) for a in fm.assigns)
    return bool(inits) and bumped and all(a.value is not None and _const(a.value) == 0 for a in inits)


def _const(node: ast.AST) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _zero_at_start(fm: FunctionModel, lam: ast.AST) -> ast.AST | None:
    if not isinstance(lam, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
        return None  # _lambdas yields only lambdas and function definitions
    args = lam.args.posonlyargs + lam.args.args
    if args and not isinstance(lam, ast.Lambda) and args[0].arg in ("self", "cls"):
        args = args[1:]
    if not args:
        return None
    env = {**_constants(fm), args[0].arg: 0.0}
    value: Value
    where: ast.AST | None
    if isinstance(lam, ast.Lambda):
        value, where = _value(lam.body, env), lam
    else:
        value, where = _run_body(lam.body, env)
    return where if _num(value) and math.isclose(value, 0.0, abs_tol=0.0) else None
