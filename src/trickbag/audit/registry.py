"""The lint rule registry: one rule = one small function whose docstring holds the explanation and a
wrong and a right example, registered under a code (``TB101``) and a short name.  The runtime audit
reports under the same codes (:data:`RUNTIME`); the checks only it can make have codes of their own
(:data:`RUNTIME_ONLY`, TB5xx) in the same space."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Rule", "Hit", "RULES", "rule", "find_rule", "select_rules", "RUNTIME", "RUNTIME_ONLY", "code_of",
           "SEVERITIES", "CONFIDENCES"]

#: how bad a finding is: ``error`` (the loop computes something else than intended), ``warning`` (a risk
#: or a cost: memory, security, reproducibility)
SEVERITIES = ("error", "warning")
#: how sure the rule is: ``high`` (the code shows the mistake: shown by default), ``low`` (it depends on
#: what one file cannot show: shown with ``--all``)
CONFIDENCES = ("high", "low")


@dataclass(frozen=True)
class Hit:
    """What a rule function yields: the offending node, a message and (optionally) a specific fix."""

    node: ast.AST
    message: str
    fix: str | None = None
    confidence: str = "high"


@dataclass(frozen=True)
class Rule:
    """A registered rule: ``code``, ``name``, one-line ``summary``, the ``why``, ``wrong``/``right``
    examples, the default ``fix``, the ``check`` function (a FileModel -> hits), its ``severity`` and
    whether it only runs when selected by name (``opt_in``: advisories such as ``torch.save(model)``)."""

    code: str
    name: str
    summary: str
    why: str
    wrong: str
    right: str
    fix: str
    check: Callable[..., Iterable[Hit]]
    severity: str = "error"
    opt_in: bool = False
    #: in a test module the rule's findings are low confidence (tests build odd loops on purpose)
    quiet_in_tests: bool = True

    def explain(self) -> str:
        """The text ``trickbag lint --explain CODE`` prints."""
        parts = [f"{self.code} {self.name}: {self.summary}", "", self.why, "", f"Fix: {self.fix}", "",
                 "Wrong:", "", textwrap.indent(self.wrong, "    "), "", "Right:", "",
                 textwrap.indent(self.right, "    ")]
        return "\n".join(parts).rstrip() + "\n"


RULES: dict[str, Rule] = {}

#: the checks only the runtime audit makes (what it sees while the loop runs), in the lint code space:
#: code -> (name, what it reports)
RUNTIME_ONLY: dict[str, tuple[str, str]] = {
    "TB501": ("scheduler-on-skipped-step", "scheduler.step() after the GradScaler skipped the optimizer step "
                                           "(inf/NaN grads)"),
    "TB502": ("param-not-in-optimizer", "trainable parameters of the model that no audited optimizer updates"),
    "TB503": ("frozen-param-decayed", "frozen parameters in an optimizer group with weight decay (moved when they "
                                      "keep a .grad)"),
}

#: the runtime audit's finding names -> their code: the static rule of the same mistake, or a TB5xx code
RUNTIME: dict[str, str] = {
    "scheduler-before-step": "TB101",
    "scheduler-per-micro-batch": "TB102",
    "zero-grad-before-step": "TB103",
    "grads-never-zeroed": "TB104",
    "clip-before-unscale": "TB106",
    "ema-per-micro-batch": "TB108",
    "ema-before-step": "TB108",
    "clip-per-micro-batch": "TB109",
    "clip-after-step": "TB113",
    "scheduler-unit-mismatch": "TB115",
    "train-in-eval-mode": "TB202",
    "eval-with-grad": "TB203",
    **{name: code for code, (name, _) in RUNTIME_ONLY.items()},
}


def code_of(audit_rule: str) -> str:
    """The code of a runtime audit finding (``'grads-never-zeroed'`` -> ``'TB104'``)."""
    return RUNTIME[audit_rule]


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


def rule(code: str, name: str, fix: str, *, severity: str = "error", opt_in: bool = False,
         quiet_in_tests: bool = True) -> Callable[[Callable], Callable]:
    """Register the decorated function as rule ``code`` / ``name`` with the default ``fix``."""
    if severity not in SEVERITIES:
        raise ValueError(f"rule {code}: severity must be one of {SEVERITIES}, not {severity!r}")

    def register(fn: Callable) -> Callable:
        if code in RULES or code in RUNTIME_ONLY:
            raise ValueError(f"rule code {code} registered twice")
        summary, why, wrong, right = _parse_doc(fn.__doc__ or "")
        RULES[code] = Rule(code, name, summary, why, wrong, right, fix, fn, severity, opt_in, quiet_in_tests)
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

    chosen = match(select, "--select") if select else {c for c, r in RULES.items() if not r.opt_in}
    if ignore:
        chosen -= match(ignore, "--ignore")
    return [RULES[c] for c in sorted(chosen)]
