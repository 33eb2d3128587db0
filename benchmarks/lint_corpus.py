"""How ``trickbag lint`` does on real training code: findings per rule and per repository, false alarms
against a file of verdicts, and lint speed (lines per second on one core).

The corpus is a folder you point it at, one sub-folder per repository (other people's code: it stays
outside this repository), e.g. ``/work/lintcorpus/repos/<owner>+<name>/``.  Every ``*.py`` file that
``trickbag lint`` would walk into is linted in this process, one file at a time, with the library API
(``trickbag.audit.lint.lint_file``); options the API has grown (``show_all`` for ``--all``) are passed
only when it accepts them, so the script measures older and newer linters alike (``--src`` lints with
another source tree of trickbag, e.g. an older commit exported with ``git archive``).

A verdict file (``--verdicts``, tab-separated, ``#`` comments) judges findings by reading the code::

    repo    relpath    line    code    verdict    reason
    karpathy+nanoGPT    train.py    301    TB201    FP    estimate_loss() is decorated with no_grad and ...

``verdict`` is ``TP`` (a real mistake), ``FP`` (a false alarm) or ``?`` (undecided).  With it the script
prints false alarms per rule, the findings not judged yet, and the true findings the linter no longer
reports (they must keep being found).

    .venv/bin/python benchmarks/lint_corpus.py /work/lintcorpus/repos --verdicts /work/lintcorpus/verdicts.tsv
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import dataclasses  # noqa: E402
import importlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from _common import add_common_args, markdown_table, setup  # noqa: E402

#: the rules of the training loop and of evaluation (the issue's "loop rules"); the rest are API,
#: environment and checkpoint advisories
LOOP_PREFIXES = ("TB1", "TB2")
VERDICTS = ("TP", "FP", "?")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", type=Path, help="folder with one sub-folder per repository")
    p.add_argument("--repos", default="", help="only these repositories (sub-folder names, comma-separated)")
    p.add_argument("--verdicts", type=Path, help="TSV of verdicts: repo, relpath, line, code, verdict, reason")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every finding (with its verdict) to OUT as JSON")
    p.add_argument("--unjudged", type=Path, metavar="OUT",
                   help="write the findings without a verdict to OUT as TSV rows with verdict '?' (to fill in)")
    p.add_argument("--all", action="store_true", help="ask the linter for every finding, low confidence included "
                                                     "(when its API has such an option)")
    p.add_argument("--select", default=None, help="only these rules (as trickbag lint --select)")
    p.add_argument("--ignore", default=None, help="skip these rules (as trickbag lint --ignore)")
    p.add_argument("--judged-only", action="store_true",
                   help="lint only the files that have a line in --verdicts (a quick check that every known true "
                        "finding is still reported; the speed and per-repository numbers then cover those files only)")
    p.add_argument("--src", type=Path, help="lint with the trickbag package under this folder (e.g. an older "
                                            "commit's src/ exported with git archive) instead of this checkout's")
    p.add_argument("--slowest", type=int, default=5, help="list the N slowest files (default 5)")
    p.add_argument("--label", default="", help="name of the measured linter in the history row printed with "
                                               "--verdicts (default: the folder it was imported from)")
    add_common_args(p, rounds=1, warmup=0)
    return p.parse_args(argv)


# --------------------------------------------------------------------------- linting
def load_linter(src: Path | None) -> Any:
    """The ``trickbag.audit.lint`` module, from ``src`` when given (before anything imported trickbag)."""
    if src is not None:
        if not (src / "trickbag" / "audit" / "lint.py").is_file():
            raise SystemExit(f"--src {src}: no trickbag/audit/lint.py under it")
        for name in [m for m in sys.modules if m == "trickbag" or m.startswith("trickbag.")]:
            del sys.modules[name]
        sys.path.insert(0, str(src.resolve()))
    return importlib.import_module("trickbag.audit.lint")


def lint_options(lint: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for ``lint_file`` that this version of the API accepts."""
    params = inspect.signature(lint.lint_source).parameters
    kw: dict[str, Any] = {}
    if args.select:
        kw["select"] = args.select.split(",")
    if args.ignore:
        kw["ignore"] = args.ignore.split(",")
    if args.all:
        name = next((n for n in ("show_all", "all", "include_low") if n in params), None)
        if name is None:
            print("note: this linter has no option for low-confidence findings; --all changes nothing")
        else:
            kw[name] = True
    return kw


def corpus_files(lint: Any, corpus: Path, repos: list[str]) -> list[tuple[str, Path]]:
    """(repository, file) pairs: the files ``trickbag lint`` would walk into, per repository folder."""
    chosen = sorted(d for d in corpus.iterdir() if d.is_dir() and (not repos or d.name in repos))
    missing = set(repos) - {d.name for d in chosen}
    if missing:
        raise SystemExit(f"--repos: no such sub-folder of {corpus}: {', '.join(sorted(missing))}")
    out = []
    for d in chosen:
        out += [(d.name, f) for f in lint.iter_files([d]) if f.suffix == ".py"]
    return out


def finding_record(f: Any, repo: str, root: Path) -> dict[str, Any]:
    """A finding as a dict (every field the Finding has), with its repository and path inside it."""
    rec = dataclasses.asdict(f) if dataclasses.is_dataclass(f) else dict(vars(f))
    rec["repo"] = repo
    rec["relpath"] = Path(f.path).resolve().relative_to(root.resolve()).as_posix()
    return rec


def run_once(lint: Any, files: list[tuple[str, Path]], corpus: Path, kw: dict[str, Any]):
    """Lint every file once; (findings, wall seconds, CPU seconds of this process, wall seconds per file).
    The CPU time is what a busy shared machine distorts least (other jobs delay the wall clock only)."""
    findings: list[dict[str, Any]] = []
    per_file: list[tuple[float, str]] = []
    total = 0.0
    c0 = time.process_time()
    for repo, f in files:
        t0 = time.perf_counter()
        found = lint.lint_file(f, **kw)
        dt = time.perf_counter() - t0
        total += dt
        per_file.append((dt, f"{repo}/{f.relative_to(corpus / repo).as_posix()}"))
        findings += [finding_record(x, repo, corpus / repo) for x in found]
    return findings, total, time.process_time() - c0, per_file


def count_lines(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


# --------------------------------------------------------------------------- verdicts
def read_verdicts(path: Path) -> dict[tuple[str, str, int, str], tuple[str, str]]:
    """(repo, relpath, line, code) -> (verdict, reason); a malformed row stops the script naming it."""
    out = {}
    with open(path, newline="") as fh:
        for n, row in enumerate(csv.reader(fh, delimiter="\t"), 1):
            if not row or row[0].startswith("#") or row[0] == "repo":
                continue
            if len(row) < 5 or not row[2].isdigit() or row[4] not in VERDICTS:
                raise SystemExit(f"{path}:{n}: expected repo, relpath, line, code, verdict (TP/FP/?), reason; "
                                 f"got {row!r}")
            out[(row[0], row[1], int(row[2]), row[3])] = (row[4], row[5] if len(row) > 5 else "")
    return out


def key(rec: dict[str, Any]) -> tuple[str, str, int, str]:
    return (rec["repo"], rec["relpath"], rec["line"], rec["rule"])


def verdict_report(findings: list[dict[str, Any]], verdicts: dict, repos: set[str], label: str = "") -> None:
    """False alarms per rule, findings still to judge, true findings no longer reported, and one markdown row
    for a history table (label, findings, loop findings, loop FP, loop FP %, all-rules FP %)."""
    per_rule: dict[str, Counter] = defaultdict(Counter)
    unjudged = []
    for rec in findings:
        v = verdicts.get(key(rec), ("unjudged", ""))[0]
        per_rule[rec["rule"]][v] += 1
        if v == "unjudged":
            unjudged.append(rec)
    distinct: dict[str, Counter] = defaultdict(Counter)
    for (code, _), v in {(rec["rule"], snippet(rec)): verdicts.get(key(rec), ("unjudged", ""))[0]
                         for rec in findings}.items():
        distinct[code][v] += 1
    rows = []
    for code in sorted(per_rule):
        rows.append([code, *_verdict_cells(per_rule[code], distinct[code])])
    for group, pick in (("loop rules (TB1xx, TB2xx)", LOOP_PREFIXES), ("all rules", ("TB",))):
        c = sum((per_rule[k] for k in per_rule if k.startswith(pick)), Counter())
        d = sum((distinct[k] for k in distinct if k.startswith(pick)), Counter())
        rows.append([f"**{group}**", *_verdict_cells(c, d)])
    print("\n## Verdicts per rule (FP % = FP / (TP + FP); distinct: copies of one snippet counted once)\n")
    print(markdown_table(["rule", "findings", "TP", "FP", "?", "not judged", "FP %", "distinct TP / FP",
                          "distinct FP %"], rows))
    loop, every = rows[-2], rows[-1]
    print(f"\nhistory row: | {label} | {len(findings)} | {loop[1]} | {loop[3]} | {loop[6]} | {every[6]} |")
    found = {key(r) for r in findings}
    lost = [k for k, (v, _) in verdicts.items() if v == "TP" and k[0] in repos and k not in found]
    print(f"\ntrue findings no longer reported: {len(lost)}")
    for k in sorted(lost):
        print(f"  {k[0]}/{k[1]}:{k[2]} {k[3]}  ({verdicts[k][1]})")
    print(f"findings not judged yet: {len(unjudged)}")
    for rec in unjudged[:200]:
        print(f"  {rec['repo']}/{rec['relpath']}:{rec['line']} {rec['rule']} {rec['message'][:110]}")


def snippet(rec: dict[str, Any], context: int = 2) -> str:
    """The flagged line and ``context`` lines either side, whitespace-normalised: copies of one snippet in copied
    scripts (or vendored files) share it, so a report can count each mistake (or false alarm) once."""
    try:
        lines = Path(rec["path"]).read_text(errors="replace").splitlines()
    except OSError:
        return f"{rec['repo']}/{rec['relpath']}:{rec['line']}"
    lo, hi = max(rec["line"] - 1 - context, 0), rec["line"] + context
    return "\n".join(" ".join(t.split()) for t in lines[lo:hi])


def _verdict_cells(c: Counter, d: Counter) -> list[Any]:
    judged, distinct = c["TP"] + c["FP"], d["TP"] + d["FP"]
    return [sum(c.values()), c["TP"], c["FP"], c["?"], c["unjudged"],
            f"{100 * c['FP'] / judged:.0f} %" if judged else "-", f"{d['TP']} / {d['FP']}",
            f"{100 * d['FP'] / distinct:.0f} %" if distinct else "-"]


# --------------------------------------------------------------------------- report
def summary(findings: list[dict[str, Any]], files: list[tuple[str, Path]], lines: dict[str, int],
            times: list[float], cpu_times: list[float], per_file: list[tuple[float, str]], slowest: int) -> None:
    by_rule = Counter(r["rule"] for r in findings)
    by_repo = Counter(r["repo"] for r in findings)
    files_per_repo = Counter(repo for repo, _ in files)
    total_lines = sum(lines.values())
    wall, cpu = statistics.median(times), statistics.median(cpu_times)
    print(f"lines linted: {total_lines}   files: {len(files)}   repositories: {len(files_per_repo)}   "
          f"findings: {len(findings)}")
    print(f"lint time: {wall:.2f} s wall (median of {len(times)}), {total_lines / wall:,.0f} lines/s, "
          f"{100_000 * wall / max(total_lines, 1):.1f} s per 100 k lines, one thread")
    print(f"CPU time of this process: {cpu:.2f} s = {100_000 * cpu / max(total_lines, 1):.1f} s per 100 k lines "
          f"(wall/CPU {wall / max(cpu, 1e-9):.2f}: above ~1.1 the machine was busy)")
    torch_in = "yes" if "torch" in sys.modules else "no"
    print(f"(torch imported by this process: {torch_in}; the thread count is pinned either way)")
    names = {r["rule"]: r.get("name", "") for r in findings}
    print("\n## Findings per rule\n")
    if any("confidence" in r for r in findings):
        conf = Counter((r["rule"], r["confidence"]) for r in findings)
        print(markdown_table(["rule", "name", "findings", "high confidence", "low confidence"],
                             [[c, names[c], n, conf[(c, "high")], conf[(c, "low")]]
                              for c, n in sorted(by_rule.items())]))
    else:
        print(markdown_table(["rule", "name", "findings"], [[c, names[c], n] for c, n in sorted(by_rule.items())]))
    print("\n## Findings per repository\n")
    print(markdown_table(["repository", "files", "lines", "findings"],
                         [[repo, files_per_repo[repo], lines[repo], by_repo[repo]] for repo in sorted(files_per_repo)]))
    if slowest > 0:
        print("\nslowest files: " + ", ".join(f"{name} {dt:.2f} s" for dt, name in sorted(per_file)[::-1][:slowest]))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.corpus.is_dir():
        raise SystemExit(f"{args.corpus}: not a folder (give the folder holding one sub-folder per repository)")
    verdicts = read_verdicts(args.verdicts) if args.verdicts else {}
    lint = load_linter(args.src)
    setup(args, "trickbag lint on a corpus of real training code")
    print(f"linter: {Path(lint.__file__).resolve().parents[2]}   corpus: {args.corpus}")
    kw = lint_options(lint, args)
    files = corpus_files(lint, args.corpus, [r for r in args.repos.split(",") if r])
    if args.judged_only:
        judged = {(repo, rel) for repo, rel, _, _ in verdicts}
        files = [(repo, f) for repo, f in files if (repo, f.relative_to(args.corpus / repo).as_posix()) in judged]
    lines: Counter = Counter()
    for repo, f in files:
        lines[repo] += count_lines(f)
    for _ in range(args.warmup):
        run_once(lint, files, args.corpus, kw)
    times, cpu_times, findings, per_file = [], [], [], []
    for _ in range(max(args.rounds, 1)):
        findings, total, cpu, per_file = run_once(lint, files, args.corpus, kw)
        times.append(total)
        cpu_times.append(cpu)
    summary(findings, files, lines, times, cpu_times, per_file, args.slowest)
    if args.verdicts:
        label = args.label or str(Path(lint.__file__).resolve().parents[2])
        verdict_report(findings, verdicts, {repo for repo, _ in files}, label)
    for rec in findings:
        v = verdicts.get(key(rec))
        rec["verdict"], rec["reason"] = v if v else ("", "")
    if args.json:
        args.json.write_text(json.dumps(findings, indent=1) + "\n")
        print(f"\nwrote {len(findings)} findings to {args.json}")
    if args.unjudged:
        with open(args.unjudged, "w", newline="") as fh:
            w = csv.writer(fh, delimiter="\t", lineterminator="\n")
            for rec in findings:
                if not rec["verdict"]:
                    w.writerow([rec["repo"], rec["relpath"], rec["line"], rec["rule"], "?", rec["message"][:150]])
        print(f"wrote the findings without a verdict to {args.unjudged}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
