"""TB001 syntax-error: The file does not parse, so nothing else in it was checked.

The check, its own helpers and its exceptions; the rule's docstring says what, why, with a wrong and a
right example."""

from __future__ import annotations

from collections.abc import Iterator

from trickbag.audit._flow import FileModel
from trickbag.audit.registry import Hit, rule

__all__: list[str] = []



@rule("TB001", "syntax-error", fix="fix the syntax error (the file was not checked)")
def syntax_error(file: FileModel) -> Iterator[Hit]:
    """The file does not parse, so nothing else in it was checked.

    One finding per file, listed once however the file was named; the other files are linted as usual.  The one
    Python-2-era spelling torch code still carries, ``x.cuda(async=True)`` (``async`` is a keyword since Python
    3.7; torch calls it ``non_blocking``), is reported at its first occurrence and the rest of the file is
    checked as if it said ``non_blocking=True``.  Reported by the linter itself with the parser's message and
    position (``SyntaxError``,
    ``IndentationError``, bytes that do not decode: a file is read as Python reads it, UTF-8 unless
    a BOM or a PEP 263 ``# -*- coding: latin-1 -*-`` line says otherwise), or as "too deeply nested
    to analyse" when an expression or block nests beyond Python's recursion limit (for the parser
    or for the analysis).  Either way it is one line for that file; the other files are checked.

    Wrong::

        for x, y in loader
            loss.backward()

    Right::

        for x, y in loader:
            loss.backward()
    """
    return iter(())
