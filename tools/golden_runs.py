#!/usr/bin/env python3
"""Golden runs: record what a named set of short runs produces, and prove later code produces the same bits.

A behaviour-preserving change (a refactor, a folder move) must not change what training writes. This tool
trains a fixed set of small runs -- every built-in recipe, shrunk to two epochs, plus DDP x2, FSDP x2,
schedule-free, SAM, SWA, EMA and mix + label smoothing on ``digits`` -- and each run is STOPPED and
RESUMED: the first ``trickbag train`` stops itself in the middle of its second epoch (the stop a SIGINT
would make, asked for by a small plug-in, :func:`stop_midway`, at a fixed update, so the position is
the same every time; exit status 130, ``checkpoints/last.pt`` written there), then
``trickbag train --resume RUN train.plugins=[]`` trains it to the end.

usage (from the repository root, with the code to test importable, e.g. ``PYTHONPATH=src``)::

    python tools/golden_runs.py record OUTDIR          # before the change: train the set into OUTDIR
    python tools/golden_runs.py compare OUTDIR         # after it: train the set again, compare with OUTDIR
    python tools/golden_runs.py list                   # the set: names and ``trickbag train`` arguments
    ... record/compare --only digits,digits-sam        # a part of the set
    ... compare OUTDIR --work DIR                      # where the new runs go (default: OUTDIR/compare-N)

``record`` refuses an OUTDIR that holds files. It writes ``OUTDIR/runs/<name>/`` (the whole run folder),
``OUTDIR/logs/<name>.log`` and ``OUTDIR/golden.json`` (the code's commit, torch's version, each run's
arguments, exit statuses and the position it was stopped at). ``compare`` trains the same set in a fresh
folder, compares each run with the recorded one and prints one line per run::

    IDENTICAL  digits  (last.pt 52 tensors, best.pt 26 tensors, metrics.csv 10 rows, ...)
    DIFFERENT  digits-sam  last.pt model/fc.weight: max abs difference 3e-08 (...); ...

then a verdict; exit status 0 when every run is identical, 1 when one differs or failed, 2 for bad input.

What is compared, per run (the checkpoint and metrics comparisons are ``trickbag verify-resume``'s own,
imported from :mod:`trickbag.runs.verify`):

* ``checkpoints/last.pt`` and ``best.pt``: every entry -- weights, EMA/SWA weights, optimizer, scheduler,
  counters, history, plug-in states, RNG states, the recipe -- every tensor with ``torch.equal`` and the
  same dtype and shape, every other value equal;
* ``metrics.csv``: every row and column;
* ``summary.txt``, ``per_class.csv``, ``confusion.csv``: every line;
* the exit statuses of both commands, and the checkpoint and position the resume continued from.

What is skipped (time, dates and where the run lives, which differ between two identical runs):

* metrics ``train/samples_per_s``, ``train/epoch_time_s`` and the checkpoint entry
  ``plugins/clock/wall_time_s`` (:data:`trickbag.runs.verify.TIME_KEYS` / ``TIME_PATHS``);
* the recipe's ``run.dir`` and ``run.name`` inside checkpoints (blanked by ``verify.compare_checkpoints``);
  every other path in the recipes is relative to the run's working folder (``runs/``, ``data/``), so equal;
* in ``summary.txt``: the ``run`` line (the run folder's path) and the seconds of the ``wall time`` line
  (its epochs and updates are compared);
* ``resumes.log``'s time stamp ``at``; the logs, TensorBoard event files and plots (PNG) are not compared.

Each run uses one thread (``train.threads=1``, ``OMP_NUM_THREADS=1`` for every process) so that the bits do
not depend on the machine's load. The runs take a few minutes in all on two CPU cores, one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
PLUGIN = "golden_runs:stop_midway"
#: the lines of these text files are compared; summary.txt with SUMMARY_SKIPPED applied
TEXT_FILES = ("summary.txt", "per_class.csv", "confusion.csv")
#: summary.txt: lines left out (the run folder's path) and parts blanked (wall-clock seconds)
SUMMARY_SKIPPED = (re.compile(r"^run\s"),)
SUMMARY_BLANKED = (re.compile(r"^(wall time\s+)[0-9.]+ (min|s|h)"),)
SKIPPED = ("metrics train/samples_per_s, train/epoch_time_s; checkpoint plugins/clock/wall_time_s; "
           "recipe run.dir/run.name; summary.txt 'run' line and wall-time seconds; resumes.log 'at'")


@dataclass(frozen=True)
class GoldenRun:
    """One run of the set: a name, the recipe and its overrides (``{data}``: the data folder, relative)."""

    name: str
    recipe: str
    overrides: tuple[str, ...]
    after: str = ""  # a run of the set that must be trained first (distill's teacher)
    #: exit status of the stopped command: 130 (interrupted); torchrun reports 1 when its workers exit 130
    stop_exit: int = 130

    def argv(self) -> list[str]:
        return [self.recipe, *self.overrides, "train.threads=1", "run.dir=runs", f"run.name={self.name}"]


_TWO = ("train.epochs=2",)
RUNS: tuple[GoldenRun, ...] = (
    # the built-in recipes, shrunk
    GoldenRun("digits", "digits", _TWO),
    GoldenRun("digits-tricks", "digits-tricks", (*_TWO, "schedule.warmup_epochs=1")),
    GoldenRun("distill", "distill", (*_TWO, "tricks.distillation.teacher=runs/digits/checkpoints/best.pt"),
              after="digits"),
    GoldenRun("mnist1d", "mnist1d", (*_TWO, "data.num_samples=2000")),
    GoldenRun("tabular", "tabular", (*_TWO, "data.root=data/table.csv", "data.label_column=target")),
    GoldenRun("imagefolder-finetune", "imagefolder-finetune",
              (*_TWO, "data.root=data/images", "data.image_size=32", "data.eval_image_size=32", "data.batch_size=8",
               "tricks.freeze.unfreeze_epoch=1", "tricks.freeze.allow_untrained=true",
               "tricks.multiscale.finetune_epochs=1")),
    GoldenRun("imagefolder-scratch", "imagefolder-scratch",
              (*_TWO, "data.root=data/images", "data.image_size=32", "data.batch_size=8")),
    GoldenRun("digits-noisy", "digits-noisy", _TWO),
    GoldenRun("digits-longtail", "digits-longtail", _TWO),
    GoldenRun("mnist1d-small", "mnist1d-small", (*_TWO, "data.num_samples=2000", "data.train_samples=400")),
    # several processes
    GoldenRun("digits-ddp2", "digits", (*_TWO, "dist.nproc=2"), stop_exit=1),
    GoldenRun("digits-fsdp2", "digits", (*_TWO, "dist.nproc=2", "dist.strategy=fsdp"), stop_exit=1),
    # optimizers and tricks on digits
    GoldenRun("digits-schedulefree", "digits", (*_TWO, "optim.name=schedulefree_adamw", "optim.lr=0.003",
                                                "optim.weight_decay=0.01", "schedule.name=none")),
    GoldenRun("digits-sam", "digits", (*_TWO, "tricks.sam.enabled=true")),
    GoldenRun("digits-swa", "digits", (*_TWO, "tricks.swa.enabled=true", "tricks.swa.start_epoch=1",
                                       "tricks.swa.anneal_epochs=0.5")),
    GoldenRun("digits-ema", "digits", (*_TWO, "tricks.ema.enabled=true", "tricks.ema.decay=0.99")),
    GoldenRun("digits-mix-smoothing", "digits", (*_TWO, "tricks.mix.enabled=true",
                                                 "tricks.label_smoothing.enabled=true")),
)


# --------------------------------------------------------------------------- the stop
def stop_midway() -> list[Any]:
    """``train.plugins`` entry of the first command: stop (as a SIGINT would) in the middle of the 2nd epoch."""
    from trickbag.plugin.interface import Plugin
    from trickbag.plugin.state import StopReason

    class StopMidway(Plugin):
        name = "golden_stop"

        def on_step(self, state: Any) -> None:
            half = max(1, state.batches_per_epoch // 2)
            if not state.should_stop and state.epoch >= 1 and state.batch_idx + 1 >= half:
                state.stop(StopReason.INTERRUPTED, f"golden stop after update {state.step}")

    return [StopMidway()]


# --------------------------------------------------------------------------- data the recipes need
def _lcg(seed: int):
    """A tiny fixed pseudo-random stream (the same numbers on every machine and Python)."""
    x = seed
    while True:
        x = (1103515245 * x + 12345) % 2**31
        yield x / 2**31


def _write_table(path: Path) -> None:
    """240 rows, 4 numeric features, 3 classes from a fixed rule plus noise."""
    r = _lcg(7)
    lines = ["a,b,c,d,target"]
    for _ in range(240):
        a, b, c, d = (round(4 * next(r) - 2, 4) for _ in range(4))
        score = a + 0.5 * b - c + 0.3 * next(r)
        lines.append(f"{a},{b},{c},{d},{0 if score < -0.7 else 1 if score < 0.7 else 2}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _png(path: Path, width: int, height: int, pixels: bytes) -> None:
    """An 8-bit RGB PNG written by hand (no imaging library needed to make the data)."""
    raw = b"".join(b"\x00" + pixels[y * width * 3:(y + 1) * width * 3] for y in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
                     + chunk(b"IEND", b""))


def _write_images(folder: Path, classes: int = 3, per_class: int = 20, size: int = 40) -> None:
    """``classes`` sub-folders of ``per_class`` PNGs: one colour channel dominates per class, plus noise."""
    r = _lcg(11)
    for c in range(classes):
        (folder / f"class{c}").mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            px = bytearray()
            for _ in range(size * size):
                px += bytes(int(255 * (0.5 * next(r) + (0.5 if ch == c else 0.0))) for ch in range(3))
            _png(folder / f"class{c}" / f"{i:03d}.png", size, size, bytes(px))


def make_data(work: Path) -> None:
    """The files the table and image-folder recipes read, under ``work/data`` (the same bytes every time)."""
    _write_table(work / "data" / "table.csv")
    _write_images(work / "data" / "images")


# --------------------------------------------------------------------------- training
def _env() -> dict[str, str]:
    """The children's environment: one thread, and the trickbag this process imports first on the path (the
    children run in another folder, so a relative ``PYTHONPATH=src`` would find an installed copy instead)."""
    code = _code().parent
    given = [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TOOLS), str(code), *given]), "OMP_NUM_THREADS": "1"}


def _trickbag(argv: list[str], work: Path, log: Path) -> int:
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"$ trickbag {' '.join(argv)}\n")
        fh.flush()
        return subprocess.call([sys.executable, "-m", "trickbag", *argv], cwd=work, stdout=fh,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env())


def _resume_position(run_dir: Path) -> dict[str, Any]:
    """What ``resumes.log`` says the resume continued from, without its time stamp."""
    log = run_dir / "resumes.log"
    if not log.exists():
        return {}
    entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {k: v for k, v in entries[-1].items() if k != "at"} if entries else {}


def train_stopped_and_resumed(run: GoldenRun, work: Path) -> dict[str, Any]:
    """Train ``run`` in ``work`` (stopped midway, then resumed); what happened, as JSON-able values."""
    log = work / "logs" / f"{run.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    first = _trickbag(["train", *run.argv(), f"train.plugins=[{PLUGIN}]", "--quiet"], work, log)
    second = _trickbag(["train", "--resume", f"runs/{run.name}", "train.plugins=[]", "--quiet"], work, log)
    return {"name": run.name, "argv": run.argv(), "exit_stop": first, "exit_resume": second,
            "resumed_from": _resume_position(work / "runs" / run.name), "seconds": round(time.monotonic() - t0, 1)}


def _code() -> Path:
    """The folder the trickbag package under test is imported from."""
    import trickbag

    return Path(trickbag.__file__).resolve().parent


def _git_commit() -> str:
    """The commit of the repository holding the code under test, and whether its sources are changed."""
    where = _code()
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "."], cwd=where, capture_output=True,
                               text=True).stdout.strip()
        return head + (" (src has uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def train_set(runs: list[GoldenRun], work: Path) -> list[dict[str, Any]]:
    print(f"golden: code under test: {_code()}", flush=True)
    make_data(work)
    done = []
    for run in runs:
        print(f"golden: training {run.name} ...", flush=True)
        done.append(train_stopped_and_resumed(run, work))
        print(f"golden:   {run.name}: exit {done[-1]['exit_stop']} then {done[-1]['exit_resume']}, "
              f"{done[-1]['seconds']} s", flush=True)
    return done


# --------------------------------------------------------------------------- comparison
def _summary_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if any(p.search(line) for p in SUMMARY_SKIPPED):
            continue
        for p in SUMMARY_BLANKED:
            line = p.sub(lambda m: f"{m.group(1)}<time>", line)
        out.append(line.rstrip())
    return out


def compare_text(a: Path, b: Path) -> list[str]:
    """Differences between two text files of a run, line by line (summary.txt without its skipped parts)."""
    if not a.exists() and not b.exists():
        return []
    if not (a.exists() and b.exists()):
        return [f"{a.name}: only in the {'recorded' if a.exists() else 'new'} run"]
    read = _summary_lines if a.name == "summary.txt" else str.splitlines
    la, lb = read(a.read_text(encoding="utf-8")), read(b.read_text(encoding="utf-8"))
    out = [f"{a.name} line {i + 1}: {x!r} vs {y!r}" for i, (x, y) in enumerate(zip(la, lb)) if x != y]
    if len(la) != len(lb):
        out.append(f"{a.name}: {len(la)} vs {len(lb)} lines")
    return out


def compare_run(recorded: Path, new: Path, facts_a: dict[str, Any], facts_b: dict[str, Any]) -> tuple[list[str],
                                                                                                      list[str]]:
    """(what was compared, differences) between a recorded run folder and a new one."""
    from trickbag.runs.verify import compare_runs

    compared, found = compare_runs(recorded, new)
    diffs = [f"{d.where}: {d.detail}" for d in found]
    for name in TEXT_FILES:
        diffs += compare_text(recorded / name, new / name)
        compared.append(name)
    for key in ("exit_stop", "exit_resume", "resumed_from", "argv"):
        if facts_a.get(key) != facts_b.get(key):
            diffs.append(f"{key}: {facts_a.get(key)!r} vs {facts_b.get(key)!r}")
    compared.append("exit statuses and resume position")
    return compared, diffs


def _fresh(base: Path) -> Path:
    n = 1
    while (base / f"compare-{n}").exists():
        n += 1
    return base / f"compare-{n}"


def _select(only: str | None) -> list[GoldenRun]:
    if not only:
        return list(RUNS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = {r.name: r for r in RUNS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"golden: unknown run(s) {unknown}; known: {', '.join(known)}")
    chosen = [known[n] for n in names]
    for r in list(chosen):  # a run's prerequisite comes first
        if r.after and known[r.after] not in chosen:
            chosen.insert(0, known[r.after])
    return sorted(chosen, key=list(RUNS).index)


def record(out: Path, only: str | None) -> int:
    if out.exists() and any(out.iterdir()):
        print(f"golden: {out} holds files; record into a new folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    import torch

    chosen = _select(only)
    runs = train_set(chosen, out)
    meta = {"commit": _git_commit(), "code": str(_code()), "torch": torch.__version__,
            "python": platform.python_version(), "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "skipped": SKIPPED, "runs": runs}
    (out / "golden.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    failed = [f"{r['name']} (exit {r['exit_stop']} then {r['exit_resume']}, expected {g.stop_exit} then 0)"
              for g, r in zip(chosen, runs) if (r["exit_stop"], r["exit_resume"]) != (g.stop_exit, 0)]
    if failed:
        print(f"golden: not stopped and finished as expected: {'; '.join(failed)}; see {out}/logs", file=sys.stderr)
        return 1
    print(f"golden: recorded {len(runs)} runs in {out}")
    return 0


def compare(out: Path, only: str | None, work: Path | None) -> int:
    meta_path = out / "golden.json"
    if not meta_path.exists():
        print(f"golden: {meta_path} not found: record first (tools/golden_runs.py record {out})", file=sys.stderr)
        return 2
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    recorded = {r["name"]: r for r in meta["runs"]}
    runs = [r for r in _select(only) if r.name in recorded]
    missing = [r.name for r in _select(only) if r.name not in recorded]
    work = work or _fresh(out)
    work.mkdir(parents=True, exist_ok=True)
    print(f"golden: recorded at {meta['commit']} (torch {meta['torch']}); now: {_git_commit()} ({_code()}); "
          f"new runs in {work}", flush=True)
    new = {r["name"]: r for r in train_set(runs, work)}
    lines, different = [], 0
    for r in runs:
        compared, diffs = compare_run(out / "runs" / r.name, work / "runs" / r.name, recorded[r.name], new[r.name])
        if diffs:
            different += 1
            shown = "; ".join(diffs[:4]) + (f"; ... {len(diffs) - 4} more" if len(diffs) > 4 else "")
            lines.append(f"DIFFERENT  {r.name}  {shown}")
        else:
            lines.append(f"IDENTICAL  {r.name}  ({', '.join(compared)})")
    print("\n".join(lines))
    print(f"skipped (time, dates, locations): {SKIPPED}")
    if missing:
        print(f"golden: not in the recording, not compared: {missing}")
    print(f"verdict: {'DIFFERENT' if different else 'IDENTICAL'}: {len(runs) - different} of {len(runs)} runs "
          "identical to the recording")
    return 1 if different or missing else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="golden_runs.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="train the set into OUTDIR (a new folder)")
    r.add_argument("outdir", type=Path)
    r.add_argument("--only", help="comma-separated run names (default: the whole set)")
    c = sub.add_parser("compare", help="train the set again and compare with the recording in OUTDIR")
    c.add_argument("outdir", type=Path)
    c.add_argument("--only", help="comma-separated run names (default: the whole set)")
    c.add_argument("--work", type=Path, help="folder of the new runs (default: OUTDIR/compare-N)")
    sub.add_parser("list", help="the runs of the set")
    args = p.parse_args(argv)
    if args.command == "list":
        for run in RUNS:
            print(f"{run.name:22s} trickbag train {' '.join(run.argv())}")
        return 0
    if args.command == "record":
        return record(args.outdir.resolve(), args.only)
    return compare(args.outdir.resolve(), args.only, args.work.resolve() if args.work else None)


if __name__ == "__main__":
    sys.exit(main())
