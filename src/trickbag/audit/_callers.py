"""The calls of a function or method from anywhere in the linted file's project, with the gradient context each
call runs in: the evidence that an evaluation forward defined in one module is run under ``torch.no_grad()`` by
an evaluation loop written in another (``network.predict(x)`` inside ``with torch.no_grad():`` of
``lib/misc.accuracy``).  One read per project, one parse per module that names the function."""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from trickbag.audit._ast import call_name, const_value
from trickbag.audit._project import in_test_folder, is_test_path, parsed_module, project_root

__all__ = ["ProjectCall", "project_calls"]

_SKIP = (".venv", "venv", "site-packages", "node_modules", ".git")
_SCAN_LIMIT = 2000
_GRAD_OFF = ("no_grad", "inference_mode")
_TRAINS = ("backward", "step", "grad")


@dataclass(frozen=True)
class ProjectCall:
    """A call of the named function: where, whether it runs without gradients (inside ``with torch.no_grad():``
    / ``inference_mode`` / ``set_grad_enabled(False)``, or in a function decorated with them), and whether the
    function it sits in trains (a ``backward``, an ``autograd.grad`` or an optimizer ``step``: a training
    forward, which needs the graph)."""

    path: str
    line: int
    grad_off: bool
    trains: bool


@functools.lru_cache(maxsize=4)
def _project_texts(root: Path) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for count, p in enumerate(sorted(root.rglob("*.py"))):
        if count > _SCAN_LIMIT:
            return ()  # too large to know
        if any(part in _SKIP for part in p.parts) or is_test_path(str(p)) or in_test_folder(str(p)):
            continue
        try:
            out.append((str(p), p.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return tuple(out)


def _grad_off(expr: ast.AST) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``no_grad`` (a bare decorator), ``set_grad_enabled(False)``."""
    if isinstance(expr, ast.Call):
        if call_name(expr) == "set_grad_enabled":
            return bool(expr.args) and const_value(expr.args[0]) is False
        expr = expr.func
    name = expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""
    return name in _GRAD_OFF


def _trains(fn: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call)
        and call_name(n) in _TRAINS
        and (call_name(n) != "grad" or "autograd" in ast.unparse(n.func))
        for n in ast.walk(fn)
    )


def _visit(node: ast.AST, name: str, path: str, off: bool, trains: bool, out: list[ProjectCall]) -> None:
    for child in ast.iter_child_nodes(node):
        c_off, c_trains = off, trains
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            c_off = any(_grad_off(d) for d in child.decorator_list)
            c_trains = _trains(child)
        elif isinstance(child, (ast.With, ast.AsyncWith)) and any(_grad_off(i.context_expr) for i in child.items):
            for item in child.items:
                _visit(item, name, path, off, trains, out)
            for st in child.body:
                _visit_one(st, name, path, True, trains, out)
            continue
        elif isinstance(child, ast.Call) and call_name(child) == name:
            out.append(ProjectCall(path, child.lineno, off, trains))
        _visit(child, name, path, c_off, c_trains, out)


def _visit_one(node: ast.AST, name: str, path: str, off: bool, trains: bool, out: list[ProjectCall]) -> None:
    if isinstance(node, ast.Call) and call_name(node) == name:
        out.append(ProjectCall(path, node.lineno, off, trains))
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        off, trains = any(_grad_off(d) for d in node.decorator_list), _trains(node)
    _visit(node, name, path, off, trains, out)


@functools.lru_cache(maxsize=256)
def _calls(root: Path, name: str) -> tuple[ProjectCall, ...]:
    needle = re.compile(rf"\b{re.escape(name)}\s*\(")
    out: list[ProjectCall] = []
    for path, text in _project_texts(root):
        if needle.search(text) is None:
            continue
        tree = parsed_module(path)
        if tree is not None:
            _visit(tree, name, path, False, False, out)
    return tuple(out)


def project_calls(path: str | Path, name: str) -> tuple[ProjectCall, ...]:
    """Every call ``name(...)`` / ``x.name(...)`` in the modules of the file's project (test modules left out); an
    empty tuple when the project is unknown or too large to scan."""
    root = project_root(path)
    if root is None:
        return ()
    return _calls(root, name)
