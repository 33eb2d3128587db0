"""Which class built an object: ``sched = WarmupCosineSchedule(opt, ...)`` in this file, or
``opt, sched = init_opt(...)`` where ``init_opt`` (this file or a module of the same project) returns an instance
of a class defined in the project.  Standard library only; the project's modules are parsed once each
(:mod:`trickbag.audit._project`)."""

from __future__ import annotations

import ast
from pathlib import Path

from trickbag.audit._ast import dotted, walk
from trickbag.audit._project import module_file, parsed_module

__all__ = ["constructed_class", "sets_value_ahead"]

_Def = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def _definition(tree: ast.Module, path: str, name: str) -> tuple[_Def, ast.Module, str] | None:
    """The class or function ``name`` means in the module ``tree`` (at ``path``): defined there (at any level), or
    bound by ``from pkg.mod import name`` to a top-level definition of a module of the same project."""
    for n in walk(tree):
        if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
            return n, tree, path
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if (a.asname or a.name) == name:
                    found = module_file(str(Path(path).parent), tuple(node.module.split(".")), node.level)
                    other = parsed_module(found) if found is not None else None
                    if other is None:
                        return None
                    d = next((d for d in other.body if isinstance(d, (ast.ClassDef, ast.FunctionDef,
                                                                        ast.AsyncFunctionDef))
                              and d.name == a.name), None)
                    return (d, other, found) if d is not None and found is not None else None
    return None


def _value_at(target: ast.AST, value: ast.AST, name: str) -> ast.AST | None | bool:
    """The value assigned to ``name`` by ``target = value``: ``value`` itself, the matching element of a tuple
    value, or ``(call, index)`` for a tuple target bound to a call's result (False: ``name`` is not assigned)."""
    if dotted(target) == name:
        return value
    if isinstance(target, (ast.Tuple, ast.List)):
        for i, t in enumerate(target.elts):
            if dotted(t) == name:
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                    return value.elts[i]
                if isinstance(value, ast.Call):
                    return ast.Tuple(elts=[value, ast.Constant(i)], ctx=ast.Load())
                return None
    return False


def _class_of(value: ast.AST | None, tree: ast.Module, path: str, depth: int) -> ast.ClassDef | None:
    if value is None or depth > 3:
        return None
    index: int | None = None
    if isinstance(value, ast.Tuple) and len(value.elts) == 2 and isinstance(value.elts[1], ast.Constant) \
            and isinstance(value.elts[1].value, int):
        index = value.elts[1].value
        value = value.elts[0]
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
        return None
    found = _definition(tree, path, value.func.id)
    if found is None:
        return None
    d, dtree, dpath = found
    if isinstance(d, ast.ClassDef):
        return d if index is None else None
    # a factory function: what it returns (at ``index`` of a returned tuple)
    for r in walk(d):
        if isinstance(r, ast.Return) and r.value is not None:
            out: ast.AST | None = r.value
            if index is not None:
                if not isinstance(out, ast.Tuple) or len(out.elts) <= index:
                    continue
                out = out.elts[index]
            if isinstance(out, ast.Name):
                out = _assigned(d, out.id)
            cls = _class_of(out, dtree, dpath, depth + 1)
            if cls is not None:
                return cls
    return None


def _assigned(scope: ast.AST, name: str) -> ast.AST | None:
    last = None
    for n in walk(scope):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                v = _value_at(t, n.value, name)
                if v is not False:
                    last = v
    return last  # type: ignore[return-value]


def constructed_class(tree: ast.Module, path: str, name: str) -> ast.ClassDef | None:
    """The class defined in the project whose instance ``name`` (``sched``, ``self.lr_schedule``) is, when the file
    assigns it from that class's constructor or from a project function that returns one; None otherwise."""
    return _class_of(_assigned(tree, name), tree, path, 0)


def sets_value_ahead(cls: ast.ClassDef) -> bool:
    """A hand-written schedule class (no base but ``object``) whose constructor does not set a value itself: its
    ``step()`` writes the value for the coming update, so it is called before that update (torch's LRSchedulers
    set step 0's value when built, and ``step()`` moves to the next one)."""
    if any(dotted(b) not in ("object",) for b in cls.bases) or cls.keywords:
        return False
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is not None and any(isinstance(n, ast.Call) and dotted(n.func) == "self.step" for n in walk(init)):
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "step" for n in cls.body)
