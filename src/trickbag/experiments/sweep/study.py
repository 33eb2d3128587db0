"""The sweep itself: an Optuna study whose trials are runs of the recipe on the one run path.

Each trial is :func:`~trickbag.runs.run.run_recipe` of the recipe with the sampled values, into
``OUT/trials/trial-NNNN`` (a full run directory: ``recipe.yaml``, ``metrics.csv``, checkpoints, the
test of ``best.pt`` and ``summary.txt``, as ``trickbag train`` writes). The objective is the best
value of ``--metric`` over the epochs; a :class:`~trickbag.experiments.sweep.PruningReporter`
stops a run the median pruner gives up on, and the trial is marked pruned.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

from trickbag.errors import TrickbagError
from trickbag.experiments import ExperimentError
from trickbag.experiments.sweep.pruning import PruningReporter
from trickbag.experiments.sweep.results import SweepResult, show, write_results
from trickbag.experiments.sweep.space import ParamSpec, load_space, recipe_with

__all__ = ["run_sweep", "Objective"]

SAMPLERS = ("grid", "random", "tpe")


def _optuna() -> Any:
    from trickbag._optional import require

    optuna = require("optuna", extra="sweep", feature="trickbag sweep")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


@dataclasses.dataclass
class Objective:
    """One trial: sample the values, run the recipe on the run path, return the best epoch value."""

    optuna: Any
    base: dict[str, Any]  #: the resolved recipe (with the sweep's overrides) as a dict
    specs: list[ParamSpec]
    metric: str
    direction: str
    trials_dir: Path
    stream: TextIO
    ran: list[int] = dataclasses.field(default_factory=list)  #: trial numbers run by this process

    def __call__(self, trial: Any) -> float:
        self.ran.append(trial.number)
        try:
            return self._run(trial)
        except TrickbagError as exc:  # this combination of values is refused: the trial fails, the sweep goes on
            msg = " ".join(str(exc).split())
            trial.set_user_attr("error", msg)
            print(f"trial {trial.number}: failed: {msg}", file=self.stream, flush=True)
            raise

    def _run(self, trial: Any) -> float:
        from trickbag.plugin.state import StopReason
        from trickbag.runs.run import run_recipe

        params = {p.key: p.suggest(trial) for p in self.specs}
        name = f"trial-{trial.number:04d}"
        recipe = recipe_with(self.base, {**params, "run.dir": str(self.trials_dir), "run.name": name},
                             f"trial {trial.number}")
        result = run_recipe(recipe, plugins=[PruningReporter(trial, self.metric)], quiet=True)
        trial.set_user_attr("run_dir", str(result.run_dir))
        trial.set_user_attr("wall_time_s", result.wall_time_s)
        trial.set_user_attr("test", {k: float(v) for k, v in result.test.items() if isinstance(v, float)})
        if result.interrupted:
            raise KeyboardInterrupt
        shown = ", ".join(f"{k}={show(v)}" for k, v in params.items())
        if result.stop_reason is StopReason.PRUNED:
            print(f"trial {trial.number}: pruned after epoch {len(result.history)} ({self.metric} "
                  f"{result.history[-1].get(self.metric, math.nan):.4g}; {shown}) {result.wall_time_s:.1f} s",
                  file=self.stream, flush=True)
            raise self.optuna.TrialPruned()
        value = self._best(result.history, trial.number)
        print(f"trial {trial.number}: {self.metric} {value:.4g} ({shown}) {result.wall_time_s:.1f} s",
              file=self.stream, flush=True)
        return value

    def _best(self, history: list[dict[str, float]], number: int) -> float:
        values = [h[self.metric] for h in history if self.metric in h and math.isfinite(h[self.metric])]
        if not values:
            keys = sorted({k for h in history for k in h})
            raise ExperimentError(f"--metric {self.metric!r} was not reported by trial {number}; "
                                  f"per-epoch keys: {', '.join(keys) or '(none)'}")
        return max(values) if self.direction == "maximize" else min(values)


def _storage_url(storage: str | None, out_dir: Path) -> str:
    if storage is None:
        return f"sqlite:///{(out_dir / 'sweep.db').resolve()}"
    if "://" in storage:
        if storage.startswith("sqlite:///"):
            Path(storage[len("sqlite:///"):]).expanduser().parent.mkdir(parents=True, exist_ok=True)
        return storage
    path = Path(storage).expanduser()
    if path.suffix not in (".db", ".sqlite", ".sqlite3"):
        raise ExperimentError(
            f"--storage {storage!r} is neither a URL (sqlite:///sweep.db) nor a .db file; give e.g. sqlite:///sweep.db"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path.resolve()}"


def _check_args(sampler: str, trials: Any, pruner: str, metric: Any,
                direction: str | None) -> Literal["maximize", "minimize"]:
    """Validate the sweep's options; returns the direction (default: minimize for */loss)."""
    if sampler not in SAMPLERS:
        raise ExperimentError(f"--sampler {sampler!r} is not allowed; allowed: {', '.join(SAMPLERS)}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ExperimentError(f"--trials must be an integer >= 1, got {trials!r}")
    if pruner not in ("median", "none"):
        raise ExperimentError(f"--pruner {pruner!r} is not allowed; allowed: median, none")
    if not isinstance(metric, str) or metric.split("/")[0] not in ("val", "train") or "/" not in metric:
        raise ExperimentError(
            f"--metric {metric!r}: a sweep optimises a per-epoch metric such as val/acc or val/loss "
            "(tuning on test/ metrics would leak the test set into the choice)"
        )
    direction = direction or ("minimize" if metric.endswith("loss") else "maximize")
    if direction == "maximize":
        return "maximize"
    if direction == "minimize":
        return "minimize"
    raise ExperimentError(f"--direction {direction!r} is not allowed; allowed: maximize, minimize")


def _make_sampler(optuna: Any, sampler: str, specs: Sequence[ParamSpec], seed: int) -> Any:
    if sampler == "grid":
        return optuna.samplers.GridSampler({p.key: p.grid() for p in specs}, seed=seed)
    if sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def prune_warmup_epochs(epochs: int) -> int:
    """Epochs a trial runs before the median rule may prune it: the first quarter (early epochs are
    noisy, and under a warm-up schedule a good learning rate can start slower than a bad one).

    >>> prune_warmup_epochs(1), prune_warmup_epochs(8), prune_warmup_epochs(30)
    (0, 2, 7)
    """
    return max(0, epochs // 4)


def _open_study(optuna: Any, url: str, name: str, *, resume: bool, settings: dict[str, Any], sampler: str,
                specs: Sequence[ParamSpec], seed: int, pruner: str, startup_trials: int, direction: str,
                warmup_epochs: int = 0) -> Any:
    """Create the study, or load it with ``resume`` (refused when it was started with other settings)."""
    try:
        with warnings.catch_warnings():  # heartbeats (stale trials of killed processes -> FAIL) are "experimental"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            rdb = optuna.storages.RDBStorage(url, heartbeat_interval=60, grace_period=180)
    except Exception as exc:  # bad URL, unwritable file, missing driver
        raise ExperimentError(f"--storage {url!r} cannot be opened: {str(exc).splitlines()[0]}") from None
    existing = {s.study_name: s.n_trials for s in optuna.get_all_study_summaries(rdb, include_best_trial=False)}
    if name in existing and not resume:
        raise ExperimentError(f"study {name!r} already exists in {url}; add --resume to continue it, or choose "
                              "--study-name")
    pr = (optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=warmup_epochs)
          if pruner == "median" else optuna.pruners.NopPruner())
    # a resumed random/TPE sampler must not replay the first trials
    smp = _make_sampler(optuna, sampler, specs, seed + existing.get(name, 0))
    study = optuna.create_study(storage=rdb, study_name=name, direction=direction, pruner=pr, sampler=smp,
                                load_if_exists=True)
    saved = study.user_attrs.get("trickbag")
    if isinstance(saved, dict) and isinstance(saved.get("recipe"), dict):
        from trickbag.recipe import stored_recipe  # saved before each schedule had its own keys: those only

        saved = {**saved, "recipe": stored_recipe(saved["recipe"])}
    if saved is None:
        study.set_user_attr("trickbag", settings)
    elif saved != settings:
        what = [k for k in settings if saved.get(k) != settings[k]]
        raise ExperimentError(
            f"study {name!r} in {url} was started with a different {', '.join(what)}; "
            "resume it with the same recipe, overrides, space and metric, or choose another --study-name"
        )
    return study


def _grid_left(study: Any, specs: Sequence[ParamSpec]) -> int:
    """Points of the grid no trial of the study has taken yet (finished or running)."""
    keys = [p.key for p in specs]
    points = set(itertools.product(*(p.grid() for p in specs)))
    taken = {tuple(t.params.get(k) for k in keys) for t in study.trials if t.state.name != "WAITING"}
    return len(points - taken)


def run_sweep(
    recipe: str,
    space: str | os.PathLike,
    *,
    sampler: Literal["grid", "random", "tpe"] = "tpe",
    trials: int = 20,
    storage: str | None = None,
    study_name: str | None = None,
    resume: bool = False,
    metric: str = "val/acc",
    direction: Literal["maximize", "minimize"] | None = None,
    out: str | os.PathLike | None = None,
    overrides: Sequence[str] = (),
    seed: int = 0,
    pruner: Literal["median", "none"] = "median",
    startup_trials: int = 2,
    stream: TextIO | None = None,
) -> SweepResult:
    """Run up to ``trials`` trials of a sweep (new study, or more trials of an existing one with ``resume``).

    Args:
        recipe: built-in recipe name or YAML path; ``overrides`` apply to every trial.
        space: search-space YAML file (:mod:`trickbag.experiments.sweep.space`).
        sampler: ``grid``, ``random`` or ``tpe`` (seeded with ``seed`` + trials already in the study).
        trials: trials to run in this call (a grid runs at most its unvisited points).
        storage: Optuna storage URL or ``.db`` path (default ``sqlite:///OUT/sweep.db``).
        study_name: default ``<recipe name>-sweep``.
        resume: load the study if it exists (required when it does) and add trials to it.
        metric: per-epoch metric (``val/*`` or ``train/*``) whose best value over epochs is the objective.
        direction: ``maximize`` / ``minimize``; default minimize for keys ending in ``loss``.
        out: sweep folder (default ``<run.dir>/sweep-<study name>``).
        pruner: ``median`` (Optuna MedianPruner, after ``startup_trials`` finished trials and never in the
            first quarter of the epochs, :func:`prune_warmup_epochs`) or ``none``.
        stream: where progress lines go (default: ``sys.stderr`` at call time).
    """
    from trickbag.recipe import load_recipe

    stream = stream if stream is not None else sys.stderr
    optuna = _optuna()
    direction = _check_args(sampler, trials, pruner, metric, direction)
    base_recipe = load_recipe(recipe, list(overrides))
    if metric.startswith("val/") and base_recipe.data.val_fraction == 0:
        raise ExperimentError(f"--metric {metric!r} needs a validation split, but data.val_fraction=0")
    specs = load_space(space, base_recipe)
    for p in specs if sampler == "grid" else ():
        p.grid()  # a range without a finite grid is refused before anything is written
    base = base_recipe.model_dump(mode="json")
    study_name = study_name or f"{base_recipe.name}-sweep"
    out_dir = Path(out) if out is not None else Path(base_recipe.run.dir) / f"sweep-{study_name}"
    if out_dir.exists() and not out_dir.is_dir():
        raise ExperimentError(f"--out {str(out_dir)!r} is a file; give a folder for the sweep")
    out_dir.mkdir(parents=True, exist_ok=True)
    url = _storage_url(storage, out_dir)
    settings = json.loads(json.dumps({"recipe": {k: v for k, v in base.items() if k != "run"},
                                      "space": [dataclasses.asdict(p) for p in specs], "metric": metric,
                                      "direction": direction}))
    study = _open_study(optuna, url, study_name, resume=resume, settings=settings, sampler=sampler, specs=specs,
                        seed=seed, pruner=pruner, startup_trials=startup_trials, direction=direction,
                        warmup_epochs=prune_warmup_epochs(base_recipe.train.epochs))
    n_before = len(study.trials)
    n_run = min(trials, _grid_left(study, specs)) if sampler == "grid" else trials
    grid_note = f" (the grid has {n_run} unvisited point{'s' if n_run != 1 else ''})" if n_run < trials else ""
    print(f"sweep {study_name!r} ({sampler}, {len(specs)} parameter{'s' if len(specs) != 1 else ''}, "
          f"{direction} {metric}): {n_before} trials already in {url}; running {n_run} more{grid_note}",
          file=stream, flush=True)
    objective = Objective(optuna, base, specs, metric, direction, out_dir / "trials", stream)
    if n_run:
        study.optimize(objective, n_trials=n_run, catch=(TrickbagError,), gc_after_trial=False)
    return write_results(optuna, study, base=base, specs=specs, url=url, out_dir=out_dir, metric=metric,
                         direction=direction, ran=objective.ran, stream=stream)
