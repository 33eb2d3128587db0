"""The lint rule registry: one rule = one small function whose docstring holds the explanation and a
wrong and a right example, registered under a code (``TB101``) and a short name."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Rule", "Hit", "RULES", "rule", "find_rule", "select_rules"]


@dataclass(frozen=True)
class Hit:
    """What a rule function yields: the offending node, a message and (optionally) a specific fix."""

    node: ast.AST
    message: str
    fix: str | None = None


@dataclass(frozen=True)
class Rule:
    """A registered rule: ``code``, ``name``, one-line ``summary``, the ``why``, ``wrong``/``right``
    examples, the default ``fix`` and the ``check`` function (a FileModel -> hits)."""

    code: str
    name: str
    summary: str
    why: str
    wrong: str
    right: str
    fix: str
    check: Callable[..., Iterable[Hit]]

    def explain(self) -> str:
        """The text ``trickbag lint --explain CODE`` prints."""
        parts = [f"{self.code} {self.name}: {self.summary}", "", self.why, "", f"Fix: {self.fix}", "",
                 "Wrong:", "", textwrap.indent(self.wrong, "    "), "", "Right:", "",
                 textwrap.indent(self.right, "    ")]
        return "\n".join(parts).rstrip() + "\n"


RULES: dict[str, Rule] = {}


def _parse_doc(doc: str) -> tuple[str, str, str, str]:
    lines = doc.strip("\n").splitlines()
    first = next((i for i, ln in enumerate(lines) if not ln.strip()), len(lines))
    summary = " ".join(ln.strip() for ln in lines[:first])
    text = textwrap.dedent("\n".join(lines[first:]))
    m = re.search(r"^Wrong::\s*\n(?P<wrong>.*?)^Right::\s*\n(?P<right>.*)\Z", text, re.S | re.M)
    if not m:
        raise ValueError(f"rule docstring needs 'Wrong::' and 'Right::' sections: {summary!r}")
    why = " ".join(text[:m.start()].split())
    return (
        summary,
        why,
        textwrap.dedent(m.group("wrong")).strip() + "\n",
        textwrap.dedent(m.group("right")).strip() + "\n",
    )


def rule(code: str, name: str, fix: str) -> Callable[[Callable], Callable]:
    """Register the decorated function as rule ``code`` / ``name`` with the default ``fix``."""

    def register(fn: Callable) -> Callable:
        if code in RULES:
            raise ValueError(f"rule code {code} registered twice")
        summary, why, wrong, right = _parse_doc(fn.__doc__ or "")
        RULES[code] = Rule(code, name, summary, why, wrong, right, fix, fn)
        return fn

    return register


def find_rule(key: str) -> Rule | None:
    """A rule by code (any case) or by name."""
    key = key.strip()
    if key.upper() in RULES:
        return RULES[key.upper()]
    return next((r for r in RULES.values() if r.name == key.lower()), None)


def select_rules(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> list[Rule]:
    """Rules chosen by codes, code prefixes (``TB1``) or names; an unknown entry is a ValueError."""

    def match(keys: Iterable[str], option: str) -> set[str]:
        out: set[str] = set()
        for key in keys:
            found = find_rule(key)
            hits = {found.code} if found else {c for c in RULES if c.startswith(key.strip().upper()) and key.strip()}
            if not hits:
                raise ValueError(f"{option}: unknown rule {key!r} (see trickbag lint --list)")
            out |= hits
        return out

    chosen = match(select, "--select") if select else set(RULES)
    if ignore:
        chosen -= match(ignore, "--ignore")
    return [RULES[c] for c in sorted(chosen)]
