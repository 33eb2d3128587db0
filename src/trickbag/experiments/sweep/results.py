"""What a sweep leaves behind: ``best_recipe.yaml``, ``trials.md`` / ``trials.csv``, ``history.png`` and
``importances.png``, and the :class:`SweepResult` returned to the caller."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from trickbag.experiments import ExperimentError
from trickbag.experiments.sweep.plots import plot_history, plot_importances
from trickbag.experiments.sweep.space import ParamSpec, recipe_with

__all__ = ["SweepResult", "write_results", "MIN_TRIALS_FOR_IMPORTANCE", "TOP_TRIALS"]

MIN_TRIALS_FOR_IMPORTANCE = 4
TOP_TRIALS = 10


@dataclasses.dataclass
class SweepResult:
    """Outcome of :func:`~trickbag.experiments.sweep.run_sweep`."""

    study_name: str
    storage: str
    out_dir: Path
    metric: str
    direction: str
    best_trial: int
    best_value: float
    best_params: dict[str, Any]
    best_recipe: Path
    counts: dict[str, int]  #: trials per state (COMPLETE, PRUNED, FAIL, RUNNING)
    markdown: str
    files: list[Path]
    ran: list[int]  #: numbers of the trials run by this call
    importances: dict[str, float] = dataclasses.field(default_factory=dict)


def show(v: Any) -> str:
    """A parameter value for a table or a progress line."""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _write_best_recipe(best: Any, base: dict[str, Any], out_dir: Path, study_name: str, metric: str,
                       direction: str) -> Path:
    from trickbag._files import atomic_write_text
    from trickbag.recipe import recipe_to_yaml

    recipe = recipe_with(base, {**best.params, "run.name": None})
    path = out_dir / "best_recipe.yaml"
    header = (f"# best trial {best.number} of sweep {study_name!r}: {metric} = {best.value:.6g} ({direction})\n"
              f"# params: {json.dumps(best.params)}\n# train it: trickbag train {path}\n")
    atomic_write_text(path, header + recipe_to_yaml(recipe))
    return path


def _write_tables(trials: Sequence[Any], complete: Sequence[Any], keys: list[str], counts: dict[str, int],
                  best_number: int, metric: str, direction: str, out_dir: Path) -> tuple[str, list[Path]]:
    from trickbag._files import atomic_write_text
    from trickbag.experiments.report import csv_text, markdown_table

    top = sorted(complete, key=lambda t: t.value, reverse=direction == "maximize")[:TOP_TRIALS]
    headers = ["rank", "trial", metric] + keys + ["epochs", "time (s)"]
    rows = [[str(i), str(t.number), t.value] + [show(t.params.get(k)) for k in keys]
            + [str(len(t.intermediate_values)), f"{t.user_attrs.get('wall_time_s', math.nan):.1f}"]
            for i, t in enumerate(top, 1)]
    summary = ", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v)
    md = markdown_table(headers, rows) + f"\n\ntrials: {summary}; best trial {best_number}."
    files = [out_dir / "trials.md", out_dir / "trials.csv"]
    atomic_write_text(files[0], md + "\n")
    csv_rows = [[t.number, t.state.name, t.value] + [t.params.get(k) for k in keys]
                + [len(t.intermediate_values), t.user_attrs.get("wall_time_s")] for t in trials]
    atomic_write_text(files[1], csv_text(["trial", "state", metric] + keys + ["epochs", "time_s"], csv_rows))
    return md, files


def _importances(optuna: Any, study: Any, specs: Sequence[ParamSpec], n_complete: int, out_dir: Path,
                 stream: TextIO) -> tuple[dict[str, float], list[Path]]:
    if len(specs) < 2 or n_complete < MIN_TRIALS_FOR_IMPORTANCE:
        return {}, []
    try:
        importances = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError) as exc:  # e.g. a parameter that never varied
        print(f"parameter importances skipped: {exc}", file=stream)
        return {}, []
    return importances, ([plot_importances(importances, out_dir / "importances.png")] if importances else [])


def write_results(optuna: Any, study: Any, *, base: dict[str, Any], specs: Sequence[ParamSpec], url: str,
                  out_dir: Path, metric: str, direction: str, ran: list[int], stream: TextIO) -> SweepResult:
    """Write the sweep's files from every trial of ``study`` (this call's and earlier ones)."""
    trials = study.trials
    TS = optuna.trial.TrialState
    counts = {s.name: sum(1 for t in trials if t.state == s) for s in (TS.COMPLETE, TS.PRUNED, TS.FAIL, TS.RUNNING)}
    complete = [t for t in trials if t.state == TS.COMPLETE and t.value is not None]
    if not complete:
        reasons = [t.user_attrs["error"] for t in trials if t.state == TS.FAIL and "error" in t.user_attrs]
        raise ExperimentError(
            f"study {study.study_name!r} has no finished trial ({counts['PRUNED']} pruned, {counts['FAIL']} failed)"
            + (f"; last failure: {reasons[-1]}" if reasons else "")
        )
    best = study.best_trial
    best_path = _write_best_recipe(best, base, out_dir, study.study_name, metric, direction)
    keys = [p.key for p in specs]
    md, tables = _write_tables(trials, complete, keys, counts, best.number, metric, direction, out_dir)
    files = [best_path, *tables, plot_history(trials, TS, metric, direction, out_dir / "history.png")]
    importances, more = _importances(optuna, study, specs, len(complete), out_dir, stream)
    return SweepResult(study.study_name, url, out_dir, metric, direction, best.number, float(best.value),
                       dict(best.params), best_path, counts, md, files + more, ran, importances)
