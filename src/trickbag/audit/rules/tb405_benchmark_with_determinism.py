"""TB405 benchmark-with-determinism: ``cudnn.benchmark = True`` together with ``cudnn.deterministic = True`` or

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from trickbag.audit._ast import Imports, call_name, child_nodes, const_value, dotted
from trickbag.audit._flow import FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



def _flag_assignments(file: FileModel) -> Iterator[tuple[str, ast.AST, int]]:
    """('benchmark' | 'deterministic', node, scope id) for the cuDNN flags set to True and determinism
    switched on, with the function (or module body) they are in."""
    for fm in file.functions:
        for node in fm.nodes:
            kind = _flag_kind(node, file.imports)
            if kind:
                yield kind, node, id(fm)


def _flag_kind(node: ast.AST, imports: Imports) -> str | None:
    if isinstance(node, ast.Assign) and const_value(node.value) is True:
        for t in node.targets:
            name = imports.resolve(dotted(t) or "")  # ``cb.deterministic`` after ``... import cudnn as cb``
            if name.endswith("cudnn.benchmark"):
                return "benchmark"
            if name.endswith("cudnn.deterministic"):
                return "deterministic"
    elif isinstance(node, ast.Call) and "use_deterministic_algorithms" in (
            call_name(node), imports.qualname(node.func).split(".")[-1]) and node.args \
            and const_value(node.args[0]) is True:
        return "deterministic"
    return None


def _branches(tree: ast.AST) -> dict[int, list[tuple[int, bool]]]:
    """node id -> the (if id, branch) pairs around it, to tell exclusive branches apart."""
    out: dict[int, list[tuple[int, bool]]] = {}

    def visit(node: ast.AST, path: list[tuple[int, bool]]) -> None:
        out[id(node)] = path
        if isinstance(node, ast.If):
            visit(node.test, path)
            for s in node.body:
                visit(s, path + [(id(node), True)])
            for s in node.orelse:
                visit(s, path + [(id(node), False)])
            return
        for child in child_nodes(node):
            visit(child, path)

    visit(tree, [])
    return out


@rule("TB405", "benchmark-with-determinism", fix="set torch.backends.cudnn.benchmark = False when determinism is on",
      severity="warning")
def benchmark_with_determinism(file: FileModel) -> Iterator[Hit]:
    """``cudnn.benchmark = True`` together with ``cudnn.deterministic = True`` or
    ``torch.use_deterministic_algorithms(True)``.

    Benchmark mode picks convolution algorithms by timing them, which differs from run to run, so
    the results are not reproducible; combined with determinism flags it defeats their purpose
    (and hides the cost of determinism behind a setting that is not honoured).

    Import aliases are followed (``from torch.backends import cudnn as cb``; ``cb.deterministic = True``).
    The flags are process-global: one set in the module body and the other in a function the file calls
    (``set_deterministic()``) conflict too, unless the two run in exclusive branches of one if/else.  An uncalled
    top-level ``main()`` / ``run()`` (an entry point a launcher or ``__main__`` guard runs) counts as run.

    A determinism branch that turns ``cudnn.benchmark`` off again after the ``True`` (``cudnn.benchmark = True``,
    then ``if cfg.deterministic: cudnn.deterministic = True; cudnn.benchmark = False``) is correct.

    Wrong::

        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = True

    Right::

        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    """
    flags = list(_flag_assignments(file))
    if not flags:
        return
    paths = _branches(file.tree)
    table = file.call_table()
    for kind, node, scope in flags:
        if kind != "benchmark":
            continue
        for other_kind, other, other_scope in flags:
            if other_kind == "deterministic" and _both_run(node, scope, other, other_scope, paths, table, file) \
                    and not _turned_off_after(file, node, other, other_scope, paths):
                yield Hit(node, "cudnn.benchmark = True picks kernels by timing: the run is not deterministic "
                                "despite the determinism settings")
                break


def _turned_off_after(file: FileModel, bench: ast.AST, det: ast.AST, scope: int, paths: dict) -> bool:
    """The branch that switches determinism on also sets ``cudnn.benchmark = False`` after the ``True``
    (``cudnn.benchmark = True``, then ``if cfg.deterministic: cudnn.deterministic = True; cudnn.benchmark = False``)."""
    fm = next((f for f in file.functions if id(f) == scope), None)
    if fm is None:
        return False
    for n in fm.nodes:
        if isinstance(n, ast.Assign) and const_value(n.value) is False and any(
                file.imports.resolve(dotted(t) or "").endswith("cudnn.benchmark") for t in n.targets) \
                and n.lineno > getattr(bench, "lineno", 1 << 30) and paths.get(id(n), []) == paths.get(id(det), []):
            return True
    return False


def _run_paths(node: ast.AST, scope: int, paths: dict, table: dict, file: FileModel,
               entry: bool = False) -> list[list[tuple[int, bool]]]:
    """The if-branches ``node`` runs under: its own, prefixed by those of each call site of its function
    (with ``entry``, an uncalled top-level function runs once, after the module body)."""
    own = paths.get(id(node), [])
    if scope == id(file.module) or (entry and not table.get(scope) and _entry_point(file, scope)):
        return [own]
    return [paths.get(id(e.node), []) + own for e in table.get(scope, [])]


_ENTRY_NAME = re.compile(r"(main|run|cli|launch|entry|start|train)(_|$)")


def _entry_point(file: FileModel, scope: int) -> bool:
    """An uncalled top-level function named like an entry point (``main(cfg)`` run by a launcher) that leaves
    ``cudnn.benchmark`` alone: it runs after the module body, whose flags are still in force.  (An uncalled
    ``enable_repro()`` helper may never run.)"""
    fm = next((f for f in file.top.values() if id(f) == scope), None)
    if fm is None or not _ENTRY_NAME.match(fm.name):
        return False
    return not any(isinstance(n, ast.Assign) and any(file.imports.resolve(dotted(t) or "").endswith("cudnn.benchmark")
                                                     for t in n.targets) for n in fm.nodes)


def _both_run(a: ast.AST, a_scope: int, b: ast.AST, b_scope: int, paths: dict, table: dict,
              file: FileModel) -> bool:
    """Can the two flag assignments both run?  The flags are process-global: in one function, or in the
    module body and functions it calls, they conflict unless they sit in exclusive branches of one if/else."""
    if a_scope == b_scope:
        mine, theirs = [paths.get(id(a), [])], [paths.get(id(b), [])]
    else:
        module = id(file.module)
        mine = _run_paths(a, a_scope, paths, table, file, b_scope == module)
        theirs = _run_paths(b, b_scope, paths, table, file, a_scope == module)
    return any(not any(i in dict(m) and dict(m)[i] != br for i, br in t) for m in mine for t in theirs)
