#!/usr/bin/env python3
"""Functions longer than a limit, counting code lines only (docstrings, comments and blank lines excluded).

usage: python tools/fnlen.py [SRC_DIR] [LIMIT]      (defaults: src/trickbag 60)

Prints the offenders, longest first, and a figure line; exits 0 when none is over LIMIT, 1 otherwise.
``make check`` (and so ``make test``) runs it: split a long function by job into small named helpers.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

_NOT_CODE = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _docstring_lines(tree: ast.Module) -> set[int]:
    """Lines of every module, class and function docstring."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (*_DEFS, ast.ClassDef, ast.Module)) and node.body:
            first = node.body[0]
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return out


def _code_lines(source: str) -> set[int]:
    """Lines that hold a code token (strings count: they are code unless they are a docstring)."""
    out: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in _NOT_CODE:
            out.update(range(tok.start[0], tok.end[0] + 1))
    return out


def long_functions(path: Path, limit: int) -> list[tuple[int, str]]:
    """``[(code lines, "file:line name")]`` of the functions in ``path`` over ``limit`` code lines."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    code = _code_lines(source) - _docstring_lines(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, _DEFS):
            n = sum(1 for line in range(node.lineno, (node.end_lineno or node.lineno) + 1) if line in code)
            if n > limit:
                out.append((n, f"{path}:{node.lineno} {node.name}"))
    return out


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path("src/trickbag")
    limit = int(argv[1]) if len(argv) > 1 else 60
    over = sorted((hit for f in sorted(root.rglob("*.py")) for hit in long_functions(f, limit)), reverse=True)
    for n, where in over:
        print(f"{n:4d} {where}")
    print(f"functions over {limit} code lines: {len(over)} (goal 0)")
    return 0 if not over else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
