"""The default-vs-``--all`` policy from the pooled first-sight verdicts, and how it generalises (leave one round out).

A negative result, kept as a record (``policy_loro.md``): the policy was measured on a fresh batch (round 12) at
60 %, not the 96 % estimated here, and was not shipped.  This script needs the linter of the ``audit12`` branch
(``trickbag.audit._policy`` and the evidence class on each finding); ``main`` does not have them.

Every fresh round's FIRST measurement (``heldout_round*_verdicts.tsv``: verdicts of findings of the linter that
round started with, before any tuning on it) is matched, by repository, file, line and rule, to the findings of
the linter under test on the same batch with ``--all`` (a JSON written by ``benchmarks/lint_corpus.py --all
--json``).  A matched finding that this linter reports with high confidence belongs to the class
(rule, ``evidence``) the rule gives it; one it reports with low confidence is already in ``--all`` by the rule's
own reason; one it does not report any more is "gone" (tuned away, mostly on that very round).

The policy: a (rule, evidence class) is shown by default when its pooled first-sight precision is >= 90 % over
>= 5 findings; with fewer, only when ``trickbag.audit._policy.DEFAULT`` names it as certain by construction.
Leave one round out: the policy derived without round k, applied to round k's first-sight findings.

    python benchmarks/lint_corpus/policy_loro.py 6=/tmp/r6.json 6b=/tmp/r6b.json ...

A finding the policy itself moved to ``--all`` (its message ends with the policy's reason) counts in its
evidence class: the classes are the rules' own, whatever ``_policy.DEMOTED`` says now.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).parent
MIN_N, MIN_PRECISION = 5, 0.90


def first_sight(round_: str) -> list[tuple[str, str, int, str, str]]:
    """(repo, relpath, line, rule, verdict) of a round's first-measurement verdict file."""
    out = []
    for line in (HERE / f"heldout_round{round_}_verdicts.tsv").read_text().splitlines():
        p = line.split("\t")
        if line.startswith(("#", "repo\t")) or len(p) < 5 or p[4] not in ("TP", "FP"):
            continue
        out.append((p[0], p[1], int(p[2]), p[3], p[4]))
    return out


def classify(rows: list[tuple[str, str, int, str, str]], current: list[dict]) -> list[tuple[str, str, str]]:
    """(rule, class, verdict): class is the evidence class of a high-confidence finding (``=`` for the rule's one
    class), ``low`` or ``gone``."""
    by_key = {(f["repo"], f["relpath"], int(f["line"]), f["rule"]): f for f in current}
    out = []
    for repo, rel, line, rule, verdict in rows:
        f = by_key.get((repo, rel, line, rule))
        if f is None:
            cls = "gone"
        elif f["confidence"] == "high" or f["message"].endswith(f"(uncertain: {_reason(f)})"):
            cls = f.get("evidence") or "="
        else:
            cls = "low"
        out.append((rule, cls, verdict))
    return out


def _reason(f: dict) -> str:
    from trickbag.audit._policy import demotion
    return demotion(f["rule"], f.get("evidence", "")) or "\0"


def decide(counts: Counter) -> dict[tuple[str, str], bool]:
    """(rule, class) -> shown by default, from pooled TP/FP counts of high-confidence classes."""
    from trickbag.audit._policy import DEFAULT
    out = {}
    for rule, cls in {(r, c) for r, c, _ in counts if c not in ("low", "gone")}:
        tp, fp = counts[(rule, cls, "TP")], counts[(rule, cls, "FP")]
        n = tp + fp
        key = rule if cls == "=" else f"{rule}:{cls}"
        by_construction = DEFAULT.get(key, "").startswith("certain by construction")
        # a rule certain by construction keeps its default with fewer than MIN_N findings and none false (TB001's
        # two false ones were files an extraction wrote from git symlinks, not linter mistakes)
        measured = n >= MIN_N and tp / n >= MIN_PRECISION
        out[(rule, cls)] = measured or (by_construction and (fp == 0 or rule == "TB001"))
    return out


def shown(policy: dict[tuple[str, str], bool], rule: str, cls: str) -> bool:
    from trickbag.audit._policy import DEFAULT
    if cls in ("low", "gone"):
        return False
    key = rule if cls == "=" else f"{rule}:{cls}"
    return policy.get((rule, cls), DEFAULT.get(key, "").startswith("certain by construction"))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rounds", nargs="+", help="ROUND=JSON: a round's name and the --all JSON of its batch")
    a = p.parse_args(argv)
    data = {}
    for spec in a.rounds:
        name, path = spec.split("=", 1)
        data[name] = classify(first_sight(name), json.loads(Path(path).read_text()))
    pooled = Counter((r, c, v) for rows in data.values() for r, c, v in rows)
    policy = decide(pooled)
    print("| rule | class | first-sight TP/FP | precision | default? |\n|---|---|---|---|---|")
    for rule, cls in sorted({(r, c) for r, c, _ in pooled}):
        tp, fp = pooled[(rule, cls, "TP")], pooled[(rule, cls, "FP")]
        verdict = "-" if cls in ("low", "gone") else ("default" if policy[(rule, cls)] else "--all")
        print(f"| {rule} | {cls} | {tp}/{fp} | {tp / (tp + fp):.0%} | {verdict} |")
    print("\n| round | first-sight findings | precision then | shown by the policy without it | true | false | "
          "precision | true findings not shown (by the policy / low or gone now) |\n|---|---|---|---|---|---|---|---|")
    for name, rows in data.items():
        rest = Counter((r, c, v) for k, rs in data.items() if k != name for r, c, v in rs)
        pol = decide(rest)
        on = [(r, c, v) for r, c, v in rows if shown(pol, r, c)]
        tp = sum(v == "TP" for *_, v in on)
        lost_policy = sum(v == "TP" and c not in ("low", "gone") and not shown(pol, r, c) for r, c, v in rows)
        lost_other = sum(v == "TP" and c in ("low", "gone") for r, c, v in rows)
        then = sum(v == "TP" for *_, v in rows)
        prec = f"{tp / len(on):.0%}" if on else "-"
        print(f"| {name} | {len(rows)} | {then / len(rows):.0%} | {len(on)} | {tp} | {len(on) - tp} | {prec} | "
              f"{lost_policy} / {lost_other} |")
    by_rule: dict[str, Counter] = defaultdict(Counter)
    for rows in data.values():
        for r, _, v in rows:
            by_rule[r][v] += 1
    print("\nper rule, every first-sight finding: " + ", ".join(
        f"{r} {c['TP']}/{c['TP'] + c['FP']}" for r, c in sorted(by_rule.items())))


if __name__ == "__main__":
    main()
