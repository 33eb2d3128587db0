"""The rule reference of docs/lint.md, generated from the registry: the table of every code (static rules,
then the runtime audit's own checks) and one section per rule (summary, why, fix, its wrong and right
examples as doctests with the findings the wrong one gets).  ``python -m trickbag.audit.docs docs/lint.md``
rewrites the part of the page between the two markers; a test keeps the page fresh."""

from __future__ import annotations

import sys
from pathlib import Path

from trickbag.audit.lint import lint_source  # (importing lint registers every rule)
from trickbag.audit.registry import RULES, RUNTIME, RUNTIME_ONLY, Rule

__all__ = ["rules_markdown", "BEGIN", "END", "refresh"]

BEGIN = "<!-- rules: generated from the registry by `python -m trickbag.audit.docs docs/lint.md`; do not edit -->"
END = "<!-- rules: end of the generated part -->"

_GROUPS = [("TB1", "Loop order (TB1xx)"), ("TB2", "Evaluation (TB2xx)"), ("TB3", "API misuse (TB3xx)"),
           ("TB4", "Environment and files (TB4xx)"), ("TB0", "The file itself (TB001)")]


def _anchor(rule: Rule) -> str:
    return f"#{rule.code.lower()}-{rule.name}"


def _table() -> list[str]:
    out = ["| code | name | severity | what |", "| --- | --- | --- | --- |"]
    for code in sorted(RULES):
        r = RULES[code]
        sev = f"{r.severity}, opt-in" if r.opt_in else r.severity
        out.append(f"| [{code}]({_anchor(r)}) | `{r.name}` | {sev} | {r.summary} |")
    for code, (name, what) in sorted(RUNTIME_ONLY.items()):
        out.append(f"| {code} | `{name}` | runtime audit only | {what} |")
    return out


def _doctest(name: str, code: str) -> list[str]:
    lines = code.rstrip("\n").splitlines()
    return [f">>> {name} = '''"] + [f"... {ln}".rstrip() for ln in lines] + ["... '''"]


def _check_call(rule: Rule, var: str) -> str:
    return f'>>> check({var}, "{rule.code}")' if rule.opt_in else f">>> check({var})"


def _section(rule: Rule) -> list[str]:
    found = lint_source("\n" + rule.wrong, select=[rule.code] if rule.opt_in else None)
    audit = sorted(n for n, c in RUNTIME.items() if c == rule.code)
    head = [f"### {rule.code} {rule.name}", "", rule.summary, "", rule.why, "", f"Fix: {rule.fix}."
            if not rule.fix.endswith(".") else f"Fix: {rule.fix}", ""]
    if audit:
        head += [f"The runtime audit reports it too, as {', '.join(f'`{n}`' for n in audit)}.", ""]
    body = ["```python", *_doctest("wrong", rule.wrong), _check_call(rule, "wrong")]
    body += [f"{f.line}:{f.col} {f.rule} {f.message}" for f in found]
    body += [*_doctest("right", rule.right), _check_call(rule, "right"), "", "```", ""]
    return head + body


def rules_markdown() -> str:
    """The generated part of docs/lint.md (between :data:`BEGIN` and :data:`END`, markers included)."""
    out = [BEGIN, "", "## Rules", "", *_table(), ""]
    for prefix, title in _GROUPS:
        rules = [RULES[c] for c in sorted(RULES) if c.startswith(prefix)]
        if rules:
            out += [f"## {title}", ""]
            for r in rules:
                out += _section(r)
    return "\n".join(out + [END]) + "\n"


def refresh(page: str) -> str:
    """``page`` with its generated part replaced by :func:`rules_markdown`."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError("the page has no generated rules part (the BEGIN and END markers)")
    return page[:start] + rules_markdown() + page[end + len(END) + 1:]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m trickbag.audit.docs docs/lint.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.write_text(refresh(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))

