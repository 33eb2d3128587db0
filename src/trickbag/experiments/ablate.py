"""Trick ablation: which of these tricks help on *this* recipe and data, by how much, and at what cost.

``trickbag ablate RECIPE --tricks mixup,ema,label_smoothing --seeds 5`` trains every *variant* of the
recipe with every seed. Variants (``--mode``):

* ``leave-one-out`` (default): ``all`` (every listed trick on, the reference), ``-<trick>`` (all but
  that one) for each trick, and ``baseline`` (all off);
* ``add-one``: ``baseline`` (the reference) and ``+<trick>`` (only that one on) for each trick.

A trick is a name from the recipe's ``tricks`` section (switched with ``tricks.<name>.enabled``), a
dotted true/false recipe key (``data.augment``), or one of the aliases ``mixup`` / ``cutmix`` (the
``tricks.mix`` section with the other method's alpha set to 0).

One *cell* = (variant, seed) is one training run in its own process and run directory
``OUT/runs/<variant>_s<seed>``; its metric (default ``test/acc`` of ``best.pt``), training wall time
and peak resident memory go into ``OUT/ablation.json``, rewritten atomically after every cell. A
killed ablation started again with the same arguments skips the finished cells. The table compares
each variant with the reference seed by seed (paired Student-t interval, :mod:`.stats`) and is
printed and written as ``OUT/ablation.md`` / ``OUT/ablation.csv``; ``OUT/ablation.png`` shows the
metric with error bars and the time per variant.

Test seam: with ``TRICKBAG_ABLATE_KILL_AFTER=N`` in the environment the ablation kills itself
(SIGKILL) right after recording its N-th cell, as an interrupted machine would.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Literal, Optional, Sequence, TextIO

from trickbag.experiments import ExperimentError
from trickbag._files import atomic_save_figure, atomic_write_text
from trickbag.experiments.report import csv_text, fmt, markdown_table
from trickbag.experiments.stats import mean_sd, paired_difference

__all__ = ["Trick", "Variant", "parse_tricks", "ablation_variants", "run_ablation", "AblationResult", "KILL_ENV"]

Mode = Literal["leave-one-out", "add-one"]
MODES = ("leave-one-out", "add-one")
KILL_ENV = "TRICKBAG_ABLATE_KILL_AFTER"
RESULTS = "ablation.json"

#: tricks known under another name: (overrides to switch on, overrides to switch off)
ALIASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "mixup": (("tricks.mix.enabled=true", "tricks.mix.cutmix_alpha=0"),
              ("tricks.mix.enabled=false", "tricks.mix.cutmix_alpha=0")),
    "cutmix": (("tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0"),
               ("tricks.mix.enabled=false", "tricks.mix.mixup_alpha=0")),
}  # the other alpha is pinned both ways, so on/off variants differ in the switch only


# --------------------------------------------------------------------------- tricks and variants
@dataclasses.dataclass(frozen=True)
class Trick:
    """A switch of the recipe: the overrides that turn it on and off."""

    name: str
    on: tuple[str, ...]
    off: tuple[str, ...]

    @property
    def keys(self) -> set[str]:
        return {o.partition("=")[0] for o in self.on + self.off}


@dataclasses.dataclass(frozen=True)
class Variant:
    """One recipe variant of an ablation: a name, the tricks it has on and its overrides."""

    name: str
    slug: str  #: directory-safe name
    enabled: tuple[str, ...]
    overrides: tuple[str, ...]


def _bool_keys() -> dict[str, str]:
    """Every recipe key whose type is exactly bool -> its dotted name."""
    from pydantic import BaseModel

    from trickbag.config import Recipe

    out: dict[str, str] = {}

    def walk(model: type, prefix: str) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            elif ann is bool:
                out[f"{prefix}{name}"] = f"{prefix}{name}"

    walk(Recipe, "")
    return out


def parse_tricks(tricks: str | Sequence[str]) -> list[Trick]:
    """Read ``--tricks`` (comma-separated or a list) into :class:`Trick` switches.

    >>> [t.on for t in parse_tricks("label_smoothing,data.augment")]
    [('tricks.label_smoothing.enabled=true',), ('data.augment=true',)]
    >>> parse_tricks("label_smothing")
    Traceback (most recent call last):
    ...
    trickbag.experiments.ExperimentError: --tricks: unknown trick 'label_smothing' (did you mean 'label_smoothing'?)...
    """
    from trickbag.config import TricksConfig

    items = tricks.split(",") if isinstance(tricks, str) else list(tricks)
    names = [str(t).strip() for t in items if str(t).strip()]
    if not names:
        raise ExperimentError("--tricks is empty; give comma-separated trick names, e.g. --tricks mixup,ema")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ExperimentError(f"--tricks names {', '.join(dup)} more than once; list each trick once")
    known = list(TricksConfig.model_fields)
    bool_keys = _bool_keys()
    out: list[Trick] = []
    for name in names:
        if name in ALIASES:
            on, off = ALIASES[name]
            out.append(Trick(name, on, off))
        elif "." in name:
            if name not in bool_keys:
                close = difflib.get_close_matches(name, list(bool_keys), n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ExperimentError(
                    f"--tricks: {name!r} is not a true/false recipe key{hint}; "
                    "give a trick name (see `trickbag tricks`) or a boolean key such as data.augment"
                )
            out.append(Trick(name, (f"{name}=true",), (f"{name}=false",)))
        elif name in known:
            key = f"tricks.{name}.enabled"
            out.append(Trick(name, (f"{key}=true",), (f"{key}=false",)))
        else:
            close = difflib.get_close_matches(name, known + list(ALIASES), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ExperimentError(
                f"--tricks: unknown trick {name!r}{hint}; allowed: {', '.join(known + list(ALIASES))}, "
                "or a true/false recipe key such as data.augment"
            )
    for i, a in enumerate(out):
        for b in out[i + 1 :]:
            if a.keys & b.keys:
                raise ExperimentError(
                    f"--tricks {a.name!r} and {b.name!r} switch the same recipe key "
                    f"({', '.join(sorted(a.keys & b.keys))}); list only one of them"
                )
    return out


def _slug(name: str) -> str:
    if name.startswith("-"):
        return "without-" + name[1:]
    if name.startswith("+"):
        return "with-" + name[1:]
    return name


def ablation_variants(tricks: Sequence[Trick], mode: Mode = "leave-one-out") -> tuple[list[Variant], str]:
    """The variants of an ablation and the name of the reference variant.

    >>> ts = parse_tricks("label_smoothing,data.augment")
    >>> vs, ref = ablation_variants(ts, "leave-one-out")
    >>> [v.name for v in vs], ref
    (['all', '-label_smoothing', '-data.augment', 'baseline'], 'all')
    >>> [v.name for v in ablation_variants(ts, "add-one")[0]]
    ['baseline', '+label_smoothing', '+data.augment']
    """
    if mode not in MODES:
        raise ExperimentError(f"--mode {mode!r} is not allowed; allowed: {', '.join(MODES)}")
    if not tricks:
        raise ExperimentError("an ablation needs at least one trick")

    def variant(name: str, on: set[str]) -> Variant:
        ov: list[str] = []
        for t in tricks:
            ov += t.on if t.name in on else t.off
        return Variant(name, _slug(name), tuple(t.name for t in tricks if t.name in on), tuple(ov))

    names = [t.name for t in tricks]
    if mode == "leave-one-out":
        vs = [variant("all", set(names))]
        if len(names) > 1:  # with one trick, "all but it" is the baseline
            vs += [variant(f"-{n}", set(names) - {n}) for n in names]
        vs.append(variant("baseline", set()))
        return vs, "all"
    return [variant("baseline", set())] + [variant(f"+{n}", {n}) for n in names], "baseline"


# --------------------------------------------------------------------------- one cell (child process)
def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB (``getrusage`` maxrss; psutil where it is missing)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        from trickbag._optional import require

        info = require("psutil", extra="bench").Process().memory_info()
        return float(getattr(info, "peak_wset", info.rss)) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 1024.0  # bytes on macOS, KiB on Linux


def metric_value(result: Any, metric: str) -> float:
    """``test/*`` from the test of best.pt; any other key: its value at the last epoch that has it."""
    if metric.startswith("test/"):
        if metric in result.test:
            return float(result.test[metric])
        available = sorted(result.test)
    else:
        for row in reversed(result.history):
            if metric in row:
                return float(row[metric])
        available = sorted({k for row in result.history for k in row})
    from trickbag.errors import TrickbagError

    raise TrickbagError(
        f"--metric {metric!r} was not produced by the run; available: {', '.join(available) or '(none)'}"
    )


def _watch_parent() -> None:
    """End this cell when the ablation that started it dies (a killed ablation leaves no workers behind)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="trickbag-parent-watch").start()


def _cell_main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="trickbag-ablate-cell")
    ap.add_argument("--cell", action="store_true")
    ap.add_argument("--recipe", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--metric", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args(argv)
    _watch_parent()
    import torch

    from trickbag.config import load_recipe
    from trickbag.errors import TrickbagError
    from trickbag.train.run import train_recipe

    torch.set_num_threads(max(1, args.threads))
    try:
        recipe = load_recipe(
            args.recipe,
            [*args.overrides, f"run.dir={args.run_dir}", f"run.name={args.name}", "run.progress=false"],
        )
        result = train_recipe(recipe, quiet=True)
        if result.interrupted:
            print("trickbag: cell interrupted", file=sys.stderr)
            return 130
        value = metric_value(result, args.metric)
    except TrickbagError as exc:
        print(f"trickbag: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    record = {
        "metric": value,
        "test": result.test,
        "best": result.best,
        "epochs": len(result.history),
        "wall_time_s": result.wall_time_s,
        "peak_rss_mb": peak_rss_mb(),
        "pid": os.getpid(),
        "finished_at": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    atomic_write_text(Path(args.result), json.dumps(record, indent=1))
    return 0


# --------------------------------------------------------------------------- the ablation (parent)
@dataclasses.dataclass
class AblationResult:
    """Outcome of :func:`run_ablation`: the table rows, the cell records and the files written."""

    out_dir: Path
    metric: str
    reference: str
    variants: list[Variant]
    seeds: list[int]
    cells: dict[str, dict[str, Any]]  #: cell name -> record (status "done" or "failed")
    rows: list[dict[str, Any]]  #: one per variant, see :func:`ablation_rows`
    markdown: str
    files: list[Path]
    ran: list[str]  #: cells run by this call (the others were already done)

    @property
    def failed(self) -> list[str]:
        return [k for k, c in self.cells.items() if c.get("status") == "failed"]


def cell_name(variant: Variant, seed: int) -> str:
    return f"{variant.slug}_s{seed}"


def ablation_rows(
    variants: Sequence[Variant],
    seeds: Sequence[int],
    cells: dict[str, dict[str, Any]],
    reference: str,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """Per variant: metric mean ± sd over seeds, paired difference vs ``reference``, time, memory."""
    done = {k: c for k, c in cells.items() if c.get("status") == "done"}

    def by_seed(v: Variant, field: str) -> dict[int, float]:
        return {s: float(done[cell_name(v, s)][field]) for s in seeds if cell_name(v, s) in done}

    ref = next(v for v in variants if v.name == reference)
    ref_metric, ref_time = by_seed(ref, "metric"), by_seed(ref, "wall_time_s")
    ref_time_mean = mean_sd(list(ref_time.values()))[0]
    rows = []
    for v in variants:
        metric, wall, mem = by_seed(v, "metric"), by_seed(v, "wall_time_s"), by_seed(v, "peak_rss_mb")
        mean, sd = mean_sd(list(metric.values()))
        row: dict[str, Any] = {
            "variant": v.name,
            "tricks_on": ", ".join(v.enabled) or "—",
            "seeds": len(metric),
            "mean": mean,
            "sd": sd,
            "delta": None,
            "ci_low": None,
            "ci_high": None,
            "distinguishable": None,
            "time_s": mean_sd(list(wall.values()))[0],
            "time_ratio": None,
            "peak_mb": max(mem.values()) if mem else math.nan,
        }
        if v.name != reference:
            common = [s for s in seeds if s in metric and s in ref_metric]
            d = paired_difference([metric[s] for s in common], [ref_metric[s] for s in common], confidence)
            row.update(delta=d.mean, ci_low=d.low, ci_high=d.high, distinguishable=d.distinguishable)
        if ref_time_mean and not math.isnan(ref_time_mean) and not math.isnan(row["time_s"]):
            row["time_ratio"] = row["time_s"] / ref_time_mean
        rows.append(row)
    return rows


def format_table(rows: Sequence[dict[str, Any]], metric: str, reference: str, confidence: float = 0.95) -> str:
    """The Markdown ablation table with its legend."""
    pct = f"{confidence * 100:g} %"
    headers = ["variant", "tricks on", "seeds", f"{metric} mean ± sd", f"Δ vs {reference} [{pct} CI]",
               "time (s)", "time ×", "peak MB"]
    body = []
    for r in rows:
        if r["delta"] is None:
            delta = "(reference)"
        elif math.isnan(r["delta"]):
            delta = "—"
        elif r["ci_low"] is None or math.isnan(r["ci_low"]):
            delta = f"{r['delta']:+.4f} [n < 2]"
        else:
            mark = " *" if r["distinguishable"] else ""
            delta = f"{r['delta']:+.4f} [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}]{mark}"
        body.append([
            r["variant"], r["tricks_on"], str(r["seeds"]), f"{fmt(r['mean'])} ± {fmt(r['sd'])}", delta,
            fmt(r["time_s"], 1), fmt(r["time_ratio"], 2), fmt(r["peak_mb"], 0),
        ])
    legend = (
        f"\n\n\\* the {pct} confidence interval of the per-seed paired difference excludes 0: "
        "distinguishable from seed noise. Time: training wall time per run (mean over seeds); "
        "peak MB: largest peak resident memory of a run's process."
    )
    return markdown_table(headers, body) + legend


def plot_ablation(
    rows: Sequence[dict[str, Any]],
    cells: dict[str, dict[str, Any]],
    variants: Sequence[Variant],
    seeds: Sequence[int],
    metric: str,
    path: Path,
) -> Path:
    """PNG: metric mean ± sd per variant (with each seed as a dot) beside the mean training time."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(rows)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 0.6 * n + 1.8), sharey=True)
    ys = list(range(n))[::-1]
    for y, r, v in zip(ys, rows, variants):
        color = "C3" if r["distinguishable"] else ("C0" if r["delta"] is None else "C7")
        ax1.errorbar([r["mean"]], [y], xerr=[0.0 if math.isnan(r["sd"]) else r["sd"]], fmt="o", color=color,
                     capsize=4, ms=7)
        pts = [cells[cell_name(v, s)]["metric"] for s in seeds
               if cells.get(cell_name(v, s), {}).get("status") == "done"]
        ax1.plot(pts, [y] * len(pts), "x", color="k", alpha=0.5, ms=5)
        ax2.barh([y], [r["time_s"]], color=color, alpha=0.8)
    ax1.set_yticks(ys, [r["variant"] for r in rows])
    ax1.set_xlabel(f"{metric} (mean ± sd; x = one seed)")
    ax1.grid(alpha=0.3, axis="x")
    ax2.set_xlabel("training time per run (s)")
    ax2.grid(alpha=0.3, axis="x")
    ax1.set_title("metric per variant (red: differs from the reference)")
    ax2.set_title("cost")
    return atomic_save_figure(fig, path)


def _comparable(settings: dict[str, Any]) -> dict[str, Any]:
    s = json.loads(json.dumps(settings))
    s.get("recipe", {}).get("run", {}).pop("name", None)
    s.get("recipe", {}).get("run", {}).pop("dir", None)
    return s


def _fmt_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1].removeprefix("trickbag: error: ") if lines else "(empty log)"


def run_ablation(
    recipe: str,
    tricks: str | Sequence[str],
    *,
    seeds: int = 3,
    mode: Mode = "leave-one-out",
    jobs: int = 1,
    out: Optional[str | os.PathLike] = None,
    overrides: Sequence[str] = (),
    metric: str = "test/acc",
    confidence: float = 0.95,
    stream: Optional[TextIO] = None,
) -> AblationResult:
    """Run (or finish) an ablation of ``tricks`` on ``recipe`` and write its table, CSV and chart.

    Args:
        recipe: built-in recipe name or YAML path.
        tricks: trick names / boolean recipe keys (comma-separated string or list).
        seeds: number of seeds; seed ``s`` sets ``train.seed=s`` for s in 0..seeds-1.
        mode: ``"leave-one-out"`` (reference: all on) or ``"add-one"`` (reference: baseline).
        jobs: cells trained at the same time, each in its own process.
        out: ablation folder (default ``<run.dir>/ablate-<recipe name>``); reusing it resumes.
        overrides: ``key.sub=value`` applied to every variant before the trick switches.
        metric: ``test/<name>`` (best.pt on the test split) or a per-epoch key (value at the last epoch).
        confidence: coverage of the paired interval.
        stream: where progress lines go (default: ``sys.stderr`` at call time).
    """
    from trickbag.config import load_recipe, recipe_to_yaml

    stream = stream if stream is not None else sys.stderr
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ExperimentError(f"--seeds must be an integer >= 1 (number of seeds per variant), got {seeds!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ExperimentError(f"--jobs must be an integer >= 1 (parallel training processes), got {jobs!r}")
    if not isinstance(metric, str) or "/" not in metric:
        raise ExperimentError(f"--metric must be a metric key such as test/acc or val/loss, got {metric!r}")
    if not 0.0 < confidence < 1.0:
        raise ExperimentError(f"confidence must be in (0, 1), got {confidence!r}")
    parsed = parse_tricks(tricks)
    variants, reference = ablation_variants(parsed, mode)
    base = load_recipe(recipe, list(overrides))
    for v in variants:  # every variant must be a valid recipe before anything runs
        load_recipe(recipe, [*overrides, *v.overrides])
    out_dir = Path(out) if out is not None else Path(base.run.dir) / f"ablate-{base.name}"
    if out_dir.exists() and not out_dir.is_dir():
        raise ExperimentError(f"--out {str(out_dir)!r} is a file; give a folder for the ablation")
    settings = {
        "recipe": base.model_dump(mode="json"),
        "tricks": [t.name for t in parsed],
        "mode": mode,
        "metric": metric,
    }
    results_path = out_dir / RESULTS
    cells: dict[str, dict[str, Any]] = {}
    if results_path.is_file():
        try:
            saved = json.loads(results_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            raise ExperimentError(f"{str(results_path)!r} is unreadable; move it away or choose another --out") from None
        if _comparable(saved.get("settings", {})) != _comparable(settings):
            old = _comparable(saved.get("settings", {}))
            new = _comparable(settings)
            what = [k for k in new if old.get(k) != new.get(k)]
            raise ExperimentError(
                f"ablation folder {str(out_dir)!r} was started with different settings "
                f"({', '.join(what) or 'recipe'} differ); rerun with the same ones to resume, or choose another --out"
            )
        cells = saved.get("cells", {})
    seed_list = list(range(seeds))
    out_dir.mkdir(parents=True, exist_ok=True)
    recipe_file = out_dir / "recipe.yaml"
    atomic_write_text(recipe_file, recipe_to_yaml(base))

    def save() -> None:
        payload = {"version": 1, "settings": settings, "seeds": seed_list, "cells": cells}
        atomic_write_text(results_path, json.dumps(payload, indent=1, sort_keys=True))

    todo = [
        (v, s) for s in seed_list for v in variants if cells.get(cell_name(v, s), {}).get("status") != "done"
    ]
    total = len(variants) * len(seed_list)
    done_before = total - len(todo)
    print(
        f"ablation of {', '.join(t.name for t in parsed)} on {base.name!r} ({mode}): {len(variants)} variants x "
        f"{len(seed_list)} seeds = {total} cells; {done_before} already done in {out_dir}, "
        f"{len(todo)} to run with {jobs} job{'s' if jobs > 1 else ''}",
        file=stream,
        flush=True,
    )
    runs_dir, cell_dir, log_dir = out_dir / "runs", out_dir / "cells", out_dir / "logs"
    for d in (runs_dir, cell_dir, log_dir):
        d.mkdir(exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // jobs)
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}
    kill_after = int(os.environ.get(KILL_ENV, "0") or 0)

    def run_cell(v: Variant, seed: int) -> dict[str, Any]:
        name = cell_name(v, seed)
        shutil.rmtree(runs_dir / name, ignore_errors=True)  # an unfinished run of an earlier attempt
        result_file = cell_dir / f"{name}.json"
        result_file.unlink(missing_ok=True)
        log = log_dir / f"{name}.log"
        cmd = [
            sys.executable, "-m", "trickbag.experiments.ablate", "--cell",
            "--recipe", str(recipe_file), "--run-dir", str(runs_dir), "--name", name,
            "--result", str(result_file), "--metric", metric, "--threads", str(threads),
            "--", *overrides, *v.overrides, f"train.seed={seed}",
        ]
        t0 = time.perf_counter()
        with open(log, "w", encoding="utf-8") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, check=False).returncode
        record: dict[str, Any] = {"variant": v.name, "seed": seed, "run_dir": str(Path("runs") / name),
                                  "cell_time_s": time.perf_counter() - t0}
        if rc == 0 and result_file.is_file():
            record.update(json.loads(result_file.read_text(encoding="utf-8")), status="done")
        else:
            record.update(status="failed", returncode=rc, log=str(log), message=_last_line(log))
        return record

    ran: list[str] = []
    t_start = time.perf_counter()
    pending = list(todo)
    stopping = False
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running: dict[Any, tuple[Variant, int]] = {}
        while pending or running:
            while pending and not stopping and len(running) < jobs:  # at most `jobs` cells started at a time
                v, s = pending.pop(0)
                running[pool.submit(run_cell, v, s)] = (v, s)
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                v, s = running.pop(fut)
                name = cell_name(v, s)
                cells[name] = rec = fut.result()
                save()
                ran.append(name)
                k = len(ran)
                eta = (time.perf_counter() - t_start) / k * (len(todo) - k)
                if rec["status"] == "done":
                    what = f"{metric} {rec['metric']:.4f}, {rec['wall_time_s']:.1f} s"
                else:
                    what = f"FAILED ({rec['message']}; log {rec['log']})"
                print(f"[{done_before + k}/{total}] {v.name} seed {s}: {what}; ETA {_fmt_eta(eta)}",
                      file=stream, flush=True)
                failures = sum(cells[c]["status"] == "failed" for c in ran)
                if not stopping and failures == k and failures >= min(2, len(todo)):
                    # a systematic problem (a typo in --metric, a broken recipe): do not spend every cell on it
                    stopping = True
                    print("stopping: the first cells of this run all failed; fix the cause and rerun",
                          file=stream, flush=True)
                if kill_after and k >= kill_after:
                    if hasattr(signal, "SIGKILL"):
                        os.kill(os.getpid(), signal.SIGKILL)
                    os._exit(137)  # pragma: no cover - platforms without SIGKILL
    rows = ablation_rows(variants, seed_list, cells, reference, confidence)
    table = format_table(rows, metric, reference, confidence)
    header = [
        "variant", "tricks_on", "seeds", "metric", "mean", "sd", "delta", "ci_low", "ci_high",
        "distinguishable", "time_s", "time_ratio", "peak_rss_mb",
    ]
    csv_rows = [
        [r["variant"], r["tricks_on"], r["seeds"], metric, r["mean"], r["sd"], r["delta"], r["ci_low"],
         r["ci_high"], r["distinguishable"], r["time_s"], r["time_ratio"], r["peak_mb"]]
        for r in rows
    ]
    files = [out_dir / "ablation.md", out_dir / "ablation.csv"]
    atomic_write_text(files[0], table + "\n")
    atomic_write_text(files[1], csv_text(header, csv_rows))
    if any(r["seeds"] for r in rows):
        files.append(plot_ablation(rows, cells, variants, seed_list, metric, out_dir / "ablation.png"))
    return AblationResult(out_dir, metric, reference, variants, seed_list,
                          {cell_name(v, s): cells[cell_name(v, s)] for s in seed_list for v in variants
                           if cell_name(v, s) in cells},
                          rows, table, files, ran)


if __name__ == "__main__":
    sys.exit(_cell_main(sys.argv[1:]))
