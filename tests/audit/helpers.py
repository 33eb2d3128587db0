"""Shared pieces of the lint rule tests: where a rule fires on a snippet."""

from __future__ import annotations

import textwrap

from trickbag.audit.lint import lint_source


def found(src: str, code: str) -> list[int]:
    """Lines where ``code`` fires on the (dedented) snippet ``src``."""
    return [f.line for f in lint_source(textwrap.dedent(src)) if f.rule == code]


def fires(code: str, wrong: str, lines: list[int], right: str) -> None:
    """``code`` fires on ``wrong`` at ``lines`` and stays silent on the corrected ``right``."""
    assert found(wrong, code) == lines
    assert found(right, code) == []
