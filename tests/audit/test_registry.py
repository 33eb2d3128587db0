"""Every registered rule: a parsed docstring (summary, why, wrong, right), its own wrong example fires,
its right example is clean; code/name lookup and --select/--ignore resolution."""

import pytest

from trickbag.audit.lint import lint_source
from trickbag.audit.registry import RULES, find_rule, select_rules


@pytest.mark.parametrize("code", sorted(RULES))
def test_wrong_example_fires_and_right_example_is_clean(code):
    rule = RULES[code]
    assert code in {f.rule for f in lint_source(rule.wrong, select=[code])}
    assert lint_source(rule.right, select=[code], show_all=True) == []


@pytest.mark.parametrize("code", sorted(RULES))
def test_explanation_has_all_parts(code):
    rule = RULES[code]
    text = rule.explain()
    assert text.startswith(f"{code} {rule.name}: {rule.summary}")
    assert "Wrong:" in text and "Right:" in text and rule.fix in text
    assert len(rule.why) > 80  # an actual explanation, not a stub
    assert rule.check.__doc__ is not None


def test_codes_and_names_are_unique_and_well_formed():
    names = [r.name for r in RULES.values()]
    assert len(set(names)) == len(names)
    assert all(len(c) == 5 and c.startswith("TB") and c[2:].isdigit() for c in RULES)
    assert len(RULES) >= 20


def test_find_rule_by_code_name_and_case():
    assert find_rule("TB101") is RULES["TB101"]
    assert find_rule("tb101") is RULES["TB101"]
    assert find_rule("scheduler-before-step") is RULES["TB101"]
    assert find_rule("TB999") is None


def test_select_and_ignore():
    assert [r.code for r in select_rules(["TB10"])] == sorted(c for c in RULES if c.startswith("TB10"))
    assert [r.code for r in select_rules(["TB101", "grads-never-zeroed"])] == ["TB101", "TB104"]
    assert "TB403" not in {r.code for r in select_rules(None, ["TB4"])}
    with pytest.raises(ValueError, match="unknown rule 'TB999'"):
        select_rules(["TB999"])
    with pytest.raises(ValueError, match="--ignore"):
        select_rules(None, ["nonsense"])


def test_lint_and_runtime_audit_share_one_code_space():
    from trickbag.audit.registry import RUNTIME, RUNTIME_ONLY
    from trickbag.audit.watch import AUDIT_RULES

    assert set(AUDIT_RULES) == set(RUNTIME)  # every runtime finding has a code
    assert not set(RUNTIME_ONLY) & set(RULES)
    for name, code in RUNTIME.items():
        # a runtime check of a static rule carries that rule's code; the others are runtime-only codes
        assert (RULES[code].name in name or name.startswith(RULES[code].name.split("-")[0])) if code in RULES \
            else RUNTIME_ONLY[code][0] == name


def test_every_rule_has_a_severity_and_opt_in_rules_run_only_when_selected():
    assert {r.severity for r in RULES.values()} <= {"error", "warning"}
    opt_in = {c for c, r in RULES.items() if r.opt_in}
    assert opt_in == {"TB404"}
    assert not opt_in & {r.code for r in select_rules()}
    assert "TB404" in {r.code for r in select_rules(["TB404"])}
