"""``trickbag lint`` (static check of training loops, no torch import) and ``trickbag audit SCRIPT``
(run a script under the runtime audit): the loop doctor, see docs/lint.md."""

from __future__ import annotations

import argparse
import sys

from trickbag.cli._common import positive_int
from trickbag.errors import TrickbagError

__all__ = ["register"]


def _codes(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [c for v in values for c in v.replace(" ", ",").split(",") if c]


def _print_rules() -> None:
    from trickbag.audit.registry import RULES, RUNTIME_ONLY

    for code in sorted(RULES):
        r = RULES[code]
        tag = "warning, opt-in" if r.opt_in else r.severity
        print(f"{r.code}  {r.name:30s} [{tag}] {r.summary}")
    for code, (name, what) in sorted(RUNTIME_ONLY.items()):
        print(f"{code}  {name:30s} [runtime audit only] {what}")


def cmd_lint(args: argparse.Namespace) -> int:
    from trickbag.audit import lint
    from trickbag.audit._config import find_config
    from trickbag.audit.registry import find_rule

    if args.explain:
        rule = find_rule(args.explain)
        if rule is None:
            raise TrickbagError(f"--explain: unknown rule {args.explain!r} (see trickbag lint --list)")
        print(rule.explain(), end="")
        return 0
    if args.list:
        _print_rules()
        return 0
    if not args.paths:
        raise TrickbagError("give at least one file or folder to lint (or --explain RULE / --list)")
    try:
        cfg = find_config(args.paths)
        select = _codes(args.select) or cfg.select or None  # the command line's --select wins
        ignore = (_codes(args.ignore) or []) + cfg.ignore or None
        exclude = (_codes(args.exclude) or []) + cfg.exclude
        findings = lint.lint_paths(args.paths, select=select, ignore=ignore, exclude=exclude, show_all=args.all)
    except (ValueError, FileNotFoundError) as exc:
        raise TrickbagError(str(exc)) from None
    if args.format == "json":
        print(lint.to_json(findings))
    else:
        for f in findings:
            print(f.format())
    if findings and args.format == "text":
        files = len({f.path for f in findings})
        print(f"trickbag lint: {len(findings)} finding{'s' * (len(findings) != 1)} in {files} "
              f"file{'s' * (files != 1)}", file=sys.stderr)
    return 1 if findings else 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Exit status: 70 if the script raised, else 1 with findings, else the script's own ``sys.exit``
    status (0 when it finished or was stopped after ``--steps``); 2 on a usage error."""
    if args.script is None:
        raise TrickbagError("give the training script to run: trickbag audit [--steps N] SCRIPT [ARGS ...] "
                            "(ARGS are optional; everything after SCRIPT goes to the script)")
    from trickbag.audit.script import run_script

    try:
        result = run_script(args.script, args.args, steps=args.steps)
    except FileNotFoundError as exc:
        raise TrickbagError(str(exc)) from None
    return result.exit_status()


def register(sub: argparse._SubParsersAction) -> None:
    lint = sub.add_parser("lint", help="find ordering mistakes in training loops (static: nothing is run)",
                          description="Check Python files, folders and the ```python blocks of Markdown files for "
                                      "training-loop mistakes.  Exit 1 with findings, 0 when clean, 2 on a usage "
                                      "error (the same as `trickbag audit`, whose findings carry the same codes).  "
                                      "Silence one line with `# noqa: CODE`.  Project defaults: [tool.trickbag.lint] "
                                      "select / ignore / exclude in pyproject.toml.  See docs/lint.md.")
    lint.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (folders: *.py, recursively)")
    lint.add_argument("--select", action="append", metavar="CODES",
                      help="only these rules: codes, code prefixes (TB1) or names, comma-separated")
    lint.add_argument("--ignore", action="append", metavar="CODES", help="skip these rules (same syntax)")
    lint.add_argument("--exclude", action="append", metavar="GLOB", help="skip files/folders matching these globs")
    lint.add_argument("--all", action="store_true",
                      help="also show low-confidence findings (what one file cannot decide: advisories, guesses "
                           "from names); by default only the mistakes the code shows")
    lint.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    lint.add_argument("--explain", metavar="RULE", help="print a rule's explanation with a wrong and a right example")
    lint.add_argument("--list", action="store_true", help="list the rules")
    lint.set_defaults(func=cmd_lint)

    audit = sub.add_parser("audit", help="run a training script under the runtime audit (first N optimizer steps)",
                           usage="trickbag audit [-h] [--steps N] SCRIPT [ARGS ...]",
                           description="Run SCRIPT with the optional ARGS under trickbag.audit, attached to the "
                                       "optimizers it creates, stop it after --steps optimizer steps and print the "
                                       "findings.  Options of `trickbag audit` come before SCRIPT; everything after "
                                       "SCRIPT is the script's (`trickbag audit train.py --steps 1000` passes "
                                       "--steps 1000 to train.py).  Exit status: 70 if the script raised (its "
                                       "traceback is printed as Python prints it), else 1 with findings, else the "
                                       "script's own sys.exit status (0 when it finished or was stopped); 2 on a "
                                       "usage error (no such script).")
    audit.add_argument("--steps", type=positive_int, default=50, metavar="N",
                       help="stop the script before optimizer step N+1 (default 50)")
    audit.add_argument("script", metavar="SCRIPT", nargs="?", help="the training script (.py)")
    audit.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                       help="optional arguments passed to the script, unchanged")
    audit.set_defaults(func=cmd_audit)
