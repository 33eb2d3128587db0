"""Per-rule fixtures (flake8-bugbear style): ``tests/audit/rules/<CODE>.py`` holds wrong and right shapes of
one rule, each mistake marked on its line with ``# expect: CODE`` (shown by default) or ``# expect-low: CODE``
(a low-confidence finding, shown with ``--all``).  The rule must report exactly the marked lines: every
unmarked line it reports is a false alarm, every marked line it misses is a miss."""

import re
from pathlib import Path

import pytest

from trickbag.audit.lint import lint_file
from trickbag.audit.registry import RULES

FIXTURES = Path(__file__).parent / "rules"
_MARK = re.compile(r"#\s*expect(?P<low>-low)?:\s*(?P<codes>TB\d{3}(?:[\s,]+TB\d{3})*)")


def marked(path: Path) -> tuple[set[tuple[int, str]], set[tuple[int, str]]]:
    """(high, low): the (line, code) pairs marked ``# expect:`` and ``# expect-low:``."""
    high, low = set(), set()
    for i, line in enumerate(path.read_text().splitlines(), 1):
        for m in _MARK.finditer(line):
            (low if m.group("low") else high).update((i, c) for c in re.split(r"[\s,]+", m.group("codes")))
    return high, low


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("TB*.py")), ids=lambda p: p.stem)
def test_rule_reports_exactly_the_marked_lines(path):
    code = path.stem
    assert code in RULES, f"{path.name}: no rule {code}"
    high, low = marked(path)
    assert high, f"{path.name} marks no mistake"
    shown = {(f.line, f.rule) for f in lint_file(path, select=[code]) if f.rule == code}
    everything = {(f.line, f.rule) for f in lint_file(path, select=[code], show_all=True) if f.rule == code}
    assert shown == high, f"default output: missed {sorted(high - shown)}, false alarms {sorted(shown - high)}"
    assert everything == high | low, f"--all: missed {sorted((high | low) - everything)}, " \
                                     f"false alarms {sorted(everything - high - low)}"
