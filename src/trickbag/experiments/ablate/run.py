"""The ablation driver: check the variants, resume what an earlier attempt finished, run the missing cells
(``--jobs`` at a time), record each one as it ends, and write the table."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, TextIO

from trickbag._files import atomic_write_text
from trickbag.experiments import ExperimentError
from trickbag.experiments.ablate.analysis import ablation_rows, format_table, write_effects, write_outputs
from trickbag.experiments.ablate.factorial import Design, effect_rows, factorial_design, format_effects, parse_fraction
from trickbag.experiments.ablate.variants import Mode, Variant, ablation_variants, cell_name, parse_tricks

__all__ = ["run_ablation", "AblationResult", "CellCallback", "CellFunction", "RESULTS", "RECIPE_FILE"]

RESULTS = "ablation.json"
RECIPE_FILE = "ablation_recipe.yaml"  # not recipe.yaml: the ablation folder is not a run directory

#: ``on_cell(name, record)``: called after each cell's record is saved in ``ablation.json``
CellCallback = Callable[[str, dict[str, Any]], None]
#: ``cell_runner(variant, seed) -> record``: trains one cell (default: a run in its own process, :class:`CellRunner`)
CellFunction = Callable[[Variant, int], dict[str, Any]]


@dataclasses.dataclass
class AblationResult:
    """Outcome of :func:`run_ablation`: the table rows, the cell records and the files written."""

    out_dir: Path
    metric: str
    reference: str
    variants: list[Variant]
    seeds: list[int]
    cells: dict[str, dict[str, Any]]  #: cell name -> record (status "done" or "failed")
    rows: list[dict[str, Any]]  #: one per variant, see :func:`~trickbag.experiments.ablate.ablation_rows`
    markdown: str
    files: list[Path]
    ran: list[str]  #: cells run by this call (the others were already done)
    design: Design | None = None  #: ``--mode factorial``: the design (rows in the order of ``variants``)
    effects: list[dict[str, Any]] | None = None  #: ``--mode factorial``: main effects, then two-way interactions

    @property
    def failed(self) -> list[str]:
        return [k for k, c in self.cells.items() if c.get("status") == "failed"]


def _check(seeds: Any, jobs: Any, metric: Any, confidence: Any) -> None:
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ExperimentError(f"--seeds must be an integer >= 1 (number of seeds per variant), got {seeds!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ExperimentError(f"--jobs must be an integer >= 1 (parallel training processes), got {jobs!r}")
    if not isinstance(metric, str) or "/" not in metric:
        raise ExperimentError(f"--metric must be a metric key such as test/acc or val/loss, got {metric!r}")
    if not 0.0 < confidence < 1.0:
        raise ExperimentError(f"confidence must be in (0, 1), got {confidence!r}")


def _comparable(settings: dict[str, Any]) -> dict[str, Any]:
    from trickbag.recipe import stored_recipe

    s = json.loads(json.dumps(settings))
    if isinstance(s.get("recipe"), dict):  # saved before each schedule had its own keys: those only
        s["recipe"] = stored_recipe(s["recipe"])
    s.get("recipe", {}).get("run", {}).pop("name", None)
    s.get("recipe", {}).get("run", {}).pop("dir", None)
    return s


def _load_cells(out_dir: Path, settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The cells an earlier attempt recorded in ``out_dir`` (refused when it had other settings)."""
    path = out_dir / RESULTS
    if not path.is_file():
        return {}
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise ExperimentError(f"{str(path)!r} is unreadable; move it away or choose another --out") from None
    old, new = _comparable(saved.get("settings", {})), _comparable(settings)
    if old != new:
        what = [k for k in new if old.get(k) != new.get(k)]
        raise ExperimentError(
            f"ablation folder {str(out_dir)!r} was started with different settings "
            f"({', '.join(what) or 'recipe'} differ); rerun with the same ones to resume, or choose another --out"
        )
    return saved.get("cells", {})


def _fmt_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@dataclasses.dataclass
class _Progress:
    """Progress lines (``[done/total] ... ETA``) and the early stop on a systematic failure."""

    stream: TextIO
    metric: str
    total: int
    done_before: int
    todo: int
    t0: float = dataclasses.field(default_factory=time.perf_counter)
    ran: list[str] = dataclasses.field(default_factory=list)
    failures: int = 0
    stopping: bool = False

    def cell_done(self, variant: Variant, seed: int, rec: dict[str, Any]) -> None:
        self.ran.append(cell_name(variant, seed))
        k = len(self.ran)
        eta = (time.perf_counter() - self.t0) / k * (self.todo - k)
        if rec["status"] == "done":
            what = f"{self.metric} {rec['metric']:.4f}, {rec['wall_time_s']:.1f} s"
        else:
            self.failures += 1
            what = f"FAILED ({rec['message']}; log {rec['log']})"
        print(f"[{self.done_before + k}/{self.total}] {variant.name} seed {seed}: {what}; ETA {_fmt_eta(eta)}",
              file=self.stream, flush=True)
        if not self.stopping and self.failures == k and self.failures >= min(2, self.todo):
            # a systematic problem (a typo in --metric, a broken recipe): do not spend every cell on it
            self.stopping = True
            print("stopping: the first cells of this run all failed; fix the cause and rerun",
                  file=self.stream, flush=True)


def _run_cells(todo: list[tuple[Variant, int]], jobs: int, runner: CellFunction, progress: _Progress,
               record: Callable[[str, dict[str, Any]], None]) -> list[str]:
    """Run ``todo`` with at most ``jobs`` cells at a time; ``record`` each as it finishes."""
    pending = list(todo)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running: dict[Any, tuple[Variant, int]] = {}
        while pending or running:
            while pending and not progress.stopping and len(running) < jobs:
                v, s = pending.pop(0)
                running[pool.submit(runner, v, s)] = (v, s)
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                v, s = running.pop(fut)
                rec = fut.result()
                record(cell_name(v, s), rec)
                progress.cell_done(v, s, rec)
    return progress.ran


def _results(out_dir: Path, design: Design | None, names: list[str], variants: list[Variant], seeds: list[int],
             cells: dict[str, dict[str, Any]], reference: str, metric: str, confidence: float,
             ) -> tuple[list[dict[str, Any]], str, list[dict[str, Any]] | None, list[Path]]:
    """The per-variant rows, the Markdown (a factorial's effects first, then the runs), the effects (factorial
    only) and the files written."""
    rows = ablation_rows(variants, seeds, cells, reference, confidence)
    table = format_table(rows, metric, reference, confidence)
    effects = None
    if design is not None:
        done = {(r, s): float(cells[cell_name(v, s)]["metric"]) for r, v in enumerate(variants) for s in seeds
                if cells.get(cell_name(v, s), {}).get("status") == "done"}
        effects = effect_rows(design, names, done, seeds, confidence)
        table = format_effects(design, names, effects, metric, confidence) + "\n\nRuns of the design:\n\n" + table
    files = write_outputs(out_dir, rows, table, cells, variants, seeds, metric)
    if effects is not None:
        files.append(write_effects(out_dir, effects))
    return rows, table, effects, files


def run_ablation(
    recipe: str,
    tricks: str | Sequence[str],
    *,
    seeds: int = 3,
    mode: Mode = "leave-one-out",
    fraction: str | float = 1,
    jobs: int = 1,
    out: str | os.PathLike | None = None,
    overrides: Sequence[str] = (),
    metric: str = "test/acc",
    confidence: float = 0.95,
    stream: TextIO | None = None,
    on_cell: CellCallback | None = None,
    cell_runner: CellFunction | None = None,
) -> AblationResult:
    """Run (or finish) an ablation of ``tricks`` on ``recipe`` and write its table, CSV and chart.

    Args:
        recipe: built-in recipe name or YAML path.
        tricks: trick names / boolean recipe keys (comma-separated string or list).
        seeds: number of seeds; seed ``s`` sets ``train.seed=s`` for s in 0..seeds-1.
        mode: ``"leave-one-out"`` (reference: all on), ``"add-one"`` (reference: baseline) or ``"factorial"``
            (the 2^k design: main effects and two-way interactions, :mod:`.factorial`).
        fraction: ``--mode factorial`` only: ``1`` (full), ``"1/2"``, ``"1/4"``, ...: a regular fraction of
            resolution V or more (refused where the number of tricks cannot reach it).
        jobs: cells trained at the same time, each in its own process.
        out: ablation folder (default ``<run.dir>/ablate-<recipe name>``); reusing it resumes.
        overrides: ``key.sub=value`` applied to every variant before the trick switches.
        metric: ``test/<name>`` (best.pt on the test split) or a per-epoch key (value at the last epoch).
        confidence: coverage of the paired interval.
        stream: where progress lines go (default: ``sys.stderr`` at call time).
        on_cell: ``on_cell(name, record)`` after each cell is recorded in ``ablation.json`` (a progress
            UI, a notifier); runs in the calling thread.
        cell_runner: ``cell_runner(variant, seed) -> record`` trains one cell instead of a run in its own process
            (a record: ``{"status": "done", "metric": ..., "wall_time_s": ..., "peak_rss_mb": ...}``, or
            ``{"status": "failed", "message": ..., "log": ...}``); for tests and other back-ends.
    """
    # imported here: `python -m trickbag.experiments.ablate.cells` must not find the module imported already
    from trickbag.experiments.ablate.cells import CellRunner
    from trickbag.recipe import load_recipe, recipe_to_yaml

    stream = stream if stream is not None else sys.stderr
    _check(seeds, jobs, metric, confidence)
    parsed = parse_tricks(tricks)
    variants, reference = ablation_variants(parsed, mode, fraction)
    design = factorial_design(len(parsed), parse_fraction(fraction)) if mode == "factorial" else None
    base = load_recipe(recipe, list(overrides))
    for v in variants:  # every variant must be a valid recipe before anything runs
        load_recipe(recipe, [*overrides, *v.overrides])
    out_dir = Path(out) if out is not None else Path(base.run.dir) / f"ablate-{base.name}"
    if out_dir.exists() and not out_dir.is_dir():
        raise ExperimentError(f"--out {str(out_dir)!r} is a file; give a folder for the ablation")
    settings: dict[str, Any] = {"recipe": base.model_dump(mode="json"), "tricks": [t.name for t in parsed],
                                "mode": mode, "metric": metric}
    if design is not None:
        settings["fraction"] = design.p  # a folder of another fraction holds other cells
    cells = _load_cells(out_dir, settings)
    seed_list = list(range(seeds))
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / RECIPE_FILE, recipe_to_yaml(base))

    def record(name: str, rec: dict[str, Any]) -> None:
        cells[name] = rec
        payload = {"version": 1, "settings": settings, "seeds": seed_list, "cells": cells}
        atomic_write_text(out_dir / RESULTS, json.dumps(payload, indent=1, sort_keys=True))
        if on_cell is not None:
            on_cell(name, rec)

    todo = [(v, s) for s in seed_list for v in variants if cells.get(cell_name(v, s), {}).get("status") != "done"]
    total = len(variants) * len(seed_list)
    what = mode if design is None else f"{mode}, {design.runs}-run design"
    print(f"ablation of {', '.join(t.name for t in parsed)} on {base.name!r} ({what}): {len(variants)} variants x "
          f"{len(seed_list)} seeds = {total} cells; {total - len(todo)} already done in {out_dir}, "
          f"{len(todo)} to run with {jobs} job{'s' if jobs > 1 else ''}", file=stream, flush=True)
    # parallel cells split the cores; a single job follows the recipe's train.threads (auto: the free cores)
    threads = max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 else None
    runner = cell_runner or CellRunner(out_dir, out_dir / RECIPE_FILE, metric, tuple(overrides), threads).run
    ran = _run_cells(todo, jobs, runner, _Progress(stream, metric, total, total - len(todo), len(todo)), record)
    rows, table, effects, files = _results(out_dir, design, [t.name for t in parsed], variants, seed_list, cells,
                                           reference, metric, confidence)
    kept = {cell_name(v, s): cells[cell_name(v, s)] for s in seed_list for v in variants if cell_name(v, s) in cells}
    return AblationResult(out_dir, metric, reference, variants, seed_list, kept, rows, table, files, ran, design,
                          effects)
