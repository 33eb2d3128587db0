"""Shared pieces of the lint rule tests: where a rule fires on a snippet."""

from __future__ import annotations

import textwrap

from trickbag.audit.lint import lint_source


def found(src: str, code: str, **kw) -> list[int]:
    """Lines where ``code`` fires on the (dedented) snippet ``src`` (high-confidence findings unless
    ``show_all=True``; ``torch='old'`` for a project that allows torch < 2.6).  An opt-in rule runs
    when ``select=[code]`` is passed."""
    return [f.line for f in lint_source(textwrap.dedent(src), **kw) if f.rule == code]


def fires(code: str, wrong: str, lines: list[int], right: str, **kw) -> None:
    """``code`` fires on ``wrong`` at ``lines`` and stays silent on the corrected ``right``."""
    assert found(wrong, code, **kw) == lines
    assert found(right, code, **kw) == []
