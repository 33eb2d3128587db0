"""docs/lint.md's rule reference is the one generated from the registry (never stale), and the generator
puts every rule, its severity and the findings of its wrong example on the page."""

from pathlib import Path

import pytest

from trickbag.audit.docs import BEGIN, END, refresh, rules_markdown
from trickbag.audit.lint import lint_source
from trickbag.audit.registry import RULES, RUNTIME_ONLY

PAGE = Path(__file__).resolve().parents[2] / "docs" / "lint.md"


def test_docs_lint_md_rule_reference_is_the_generated_one():
    page = PAGE.read_text(encoding="utf-8")
    assert refresh(page) == page, \
        "docs/lint.md is stale: regenerate it with `python -m trickbag.audit.docs docs/lint.md`"


def test_generated_reference_has_every_rule_with_its_wrong_examples_findings():
    text = rules_markdown()
    assert text.startswith(BEGIN) and text.rstrip().endswith(END)
    for code, rule in RULES.items():
        assert f"### {code} {rule.name}\n" in text
        for f in lint_source("\n" + rule.wrong, select=[code]):
            if f.rule == code:
                assert f"{f.line}:{f.col} {code} {f.message}" in text
    assert all(f"| {code} | `{name}` | runtime audit only |" in text for code, (name, _) in RUNTIME_ONLY.items())


def test_refresh_refuses_a_page_without_markers():
    with pytest.raises(ValueError, match="markers"):
        refresh("# a page\n")
