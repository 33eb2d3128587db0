"""Small helpers over Python's ``ast`` for the lint rules: dotted names, calls in evaluation order,
import aliases, edit distance.  Standard library only (``trickbag lint`` never imports torch)."""

from __future__ import annotations

import ast
import functools
import re
from collections import deque
from collections.abc import Iterable, Iterator

__all__ = ["dotted", "walk", "child_nodes", "call_name", "receiver", "calls_in_order", "Imports", "edit_distance",
           "name_tokens", "names_in", "const_value", "str_const", "has_binop", "walk_no_defs", "dict_entries"]

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def dotted(node: ast.AST | None) -> str | None:
    """``a.b.c`` for a Name/Attribute chain (``x[0]`` becomes ``x[]``), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Subscript):
        base = dotted(node.value)
        return f"{base}[]" if base else None
    return None


def call_name(call: ast.Call) -> str:
    """The called name: ``f`` for ``f(...)``, ``m`` for ``x.y.m(...)``, '' for anything else."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def receiver(call: ast.Call) -> str | None:
    """The dotted receiver of a method call (``opt`` for ``opt.step()``), else None."""
    return dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None


def calls_in_order(node: ast.AST) -> list[ast.Call]:
    """Every call inside ``node`` in evaluation order (arguments before the call, receiver first);
    lambda bodies and nested definitions are not entered."""
    out: list[ast.Call] = []
    _post_order(node, out)
    return out


def _post_order(node: ast.AST, out: list[ast.Call]) -> None:
    """Iterative (a 1000-term ``x + x + ...`` must not hit the recursion limit): children first, in
    evaluation order, then the call itself."""
    todo: list[tuple[ast.AST, bool]] = [(node, False)]
    while todo:
        n, done = todo.pop()
        if done:
            out.append(n)  # type: ignore[arg-type]
            continue
        if isinstance(n, _DEFS):
            continue
        children: list[ast.AST]
        if isinstance(n, ast.Call):
            todo.append((n, True))
            children = [n.func, *n.args, *(k.value for k in n.keywords)]
        else:
            children = child_nodes(n)
        todo.extend((c, False) for c in reversed(children))


#: the child fields of each node type, without ``ctx`` (Load/Store markers no rule looks at)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes`` as a list, without the ``ctx`` markers, computed once per node (kept on the node:
    the trees are walked many times by the flow model and the rules)."""
    cached = node.__dict__.get("_tb_children")
    if cached is not None:
        return cached
    fields = _CHILD_FIELDS.get(type(node))
    if fields is None:
        fields = _CHILD_FIELDS[type(node)] = tuple(f for f in node._fields if f != "ctx")
    out: list[ast.AST] = []
    for f in fields:
        v = getattr(node, f, None)
        if isinstance(v, list):
            out.extend(x for x in v if isinstance(x, ast.AST))
        elif isinstance(v, ast.AST):
            out.append(v)
    node.__dict__["_tb_children"] = out
    return out


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first, same order) over :func:`child_nodes`."""
    todo = deque([node])
    while todo:
        n = todo.popleft()
        todo.extend(child_nodes(n))
        yield n


def walk_no_defs(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not descend into nested functions, classes or lambdas."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for child in child_nodes(n):
            if not isinstance(child, _DEFS):
                todo.append(child)


class Imports:
    """Import aliases of a module: local name -> qualified name (``F`` -> ``torch.nn.functional``)."""

    def __init__(self, nodes: ast.AST | list[ast.AST]) -> None:
        self.alias: dict[str, str] = {}
        for node in nodes if isinstance(nodes, list) else walk(nodes):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        self.alias.setdefault(a.name.split(".")[0], a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.alias[a.asname or a.name] = f"{node.module}.{a.name}"

    def qualname(self, node: ast.AST | None) -> str:
        """The qualified dotted name of an expression (aliases resolved), '' when it has none."""
        if isinstance(node, ast.Call):
            node = node.func
        return self.resolve(dotted(node) or "")

    def resolve(self, name: str) -> str:
        """A dotted name with its first component's alias resolved (``cb.deterministic`` ->
        ``torch.backends.cudnn.deterministic`` after ``from torch.backends import cudnn as cb``)."""
        if not name:
            return ""
        head, _, rest = name.partition(".")
        full = self.alias.get(head, head)
        return f"{full}.{rest}" if rest else full


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance with adjacent transpositions counted as one edit."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


@functools.lru_cache(maxsize=65536)
def name_tokens(text: str) -> tuple[str, ...]:
    """Lower-case words of an identifier: ``valLoader_2`` -> ``('val', 'loader', '2')`` (cached: the same names
    come back in every file)."""
    text = _CAMEL.sub(r"\1_\2", text)
    return tuple(t for t in _NON_WORD.split(text.lower()) if t)


_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")


def names_in(node: ast.AST) -> set[str]:
    """Every Name id and dotted Attribute chain mentioned in ``node`` (not inside nested defs)."""
    out: set[str] = set()
    for n in walk_no_defs(node):
        if isinstance(n, (ast.Name, ast.Attribute)):
            d = dotted(n)
            if d:
                out.add(d)
    return out


def dict_entries(value: ast.AST) -> list[tuple[object, ast.expr]]:
    """(key, value) of a dict literal or a ``dict(...)`` call: a constant key as its value, any other key (a name,
    an expression, a ``**spread``, a positional argument of ``dict``) by a node of its own, so no two collide."""
    if isinstance(value, ast.Dict):
        return [(const_value(k) if isinstance(k, ast.Constant) else (k if k is not None else v), v)
                for k, v in zip(value.keys, value.values)]
    if isinstance(value, ast.Call) and call_name(value) == "dict":
        return [(a, a) for a in value.args] + [(k.arg or k, k.value) for k in value.keywords]
    return []


def const_value(node: ast.AST | None) -> object:
    """The value of a constant (``-1`` included), else the sentinel ``...``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else ...
    return ...


def str_const(node: ast.AST | None) -> str | None:
    """The value of a string constant, else None (``isinstance(const_value(node), str)`` with the str typed)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def has_binop(node: ast.AST, ops: tuple[type, ...]) -> bool:
    """True when ``node`` contains a binary operation of one of ``ops`` (or an augmented one)."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ops) for n in walk_no_defs(node))


def opposite_branches(nodes: Iterable[ast.AST], a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` sit in the two branches of one ``if`` among ``nodes`` (one run takes only one of them)."""
    for n in nodes:
        if isinstance(n, ast.If) and n.orelse:
            sides = [{id(x) for st in branch for x in walk(st)} for branch in (n.body, n.orelse)]
            if (id(a) in sides[0] and id(b) in sides[1]) or (id(a) in sides[1] and id(b) in sides[0]):
                return True
    return False
