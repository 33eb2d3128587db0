"""Hyper-parameter sweeps on Optuna: any recipe key, grid / random / TPE, median pruning, SQLite resume.

``trickbag sweep RECIPE --space space.yaml --sampler tpe --trials 30 --storage sqlite:///sweep.db``

The search space is a YAML mapping from dotted recipe keys to distributions::

    optim.lr:            {type: log, low: 1.0e-3, high: 0.3}          # log-uniform float
    optim.weight_decay:  {type: float, low: 0.0, high: 1.0e-3}        # uniform float (step: optional)
    data.batch_size:     {type: int, low: 16, high: 128, step: 16}
    optim.name:          {type: categorical, choices: [sgd, adamw]}

Every key and bound is checked against the recipe schema before the first trial (an unknown key
is one line naming it, exit 2). The grid sampler needs a finite grid: ``choices``, an ``int``
range, a ``float`` with ``step``, or a ``log`` with ``num`` points (geometrically spaced, both ends
included).

Each trial trains the recipe with the sampled values (``OUT/trials/trial-NNNN``: ``recipe.yaml`` and
``metrics.csv``); the objective is the best value of ``--metric`` over the epochs (in
``--direction``). A :class:`PruningReporter` plug-in reports the metric after every epoch and, when
the median pruner says so, stops the run and the trial is marked pruned. Trials live in the Optuna
storage (SQLite by default), so a killed sweep continues with ``--resume``, and several processes
started with ``--resume`` share one study. At the end: ``best_recipe.yaml`` (the recipe with the
best trial's values, ready for ``trickbag train``), ``trials.md`` / ``trials.csv`` (top trials),
``history.png`` (objective per trial, best so far) and ``importances.png`` (fANOVA parameter
importances, when there are at least 2 parameters and 4 finished trials).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Literal, Optional, Sequence, TextIO

import yaml

from trickbag.experiments import ExperimentError
from trickbag.train.plugin import Plugin

__all__ = ["ParamSpec", "load_space", "PruningReporter", "run_sweep", "SweepResult"]

TYPES = ("float", "log", "int", "categorical")
_FIELDS = {"type", "low", "high", "step", "num", "choices"}
MIN_TRIALS_FOR_IMPORTANCE = 4


def _optuna() -> Any:
    from trickbag._optional import require

    optuna = require("optuna", extra="sweep")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


# --------------------------------------------------------------------------- search space
@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One dimension of the search space."""

    key: str
    type: Literal["float", "log", "int", "categorical"]
    low: Any = None
    high: Any = None
    step: Any = None
    num: Optional[int] = None
    choices: Optional[tuple[Any, ...]] = None

    def suggest(self, trial: Any) -> Any:
        """Ask an Optuna trial for a value of this parameter."""
        if self.type == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.type == "int":
            return trial.suggest_int(self.key, self.low, self.high, step=self.step or 1)
        if self.type == "log":
            return trial.suggest_float(self.key, self.low, self.high, log=True)
        return trial.suggest_float(self.key, self.low, self.high, step=self.step)

    def grid(self) -> list[Any]:
        """The values of this parameter on a grid (raises :class:`ExperimentError` when it has none)."""
        if self.type == "categorical":
            return list(self.choices)
        if self.type == "int":
            return list(range(self.low, self.high + 1, self.step or 1))
        if self.type == "float" and self.step is not None:
            n = int(math.floor((self.high - self.low) / self.step + 1e-9))
            return [min(self.low + i * self.step, self.high) for i in range(n + 1)]
        if self.type == "log" and self.num is not None:
            import numpy as np

            vals = np.geomspace(self.low, self.high, self.num).tolist()
            return [min(max(v, self.low), self.high) for v in vals]
        need = "step" if self.type == "float" else "num"
        raise ExperimentError(
            f"--sampler grid: {self.key!r} ({self.type}) has no finite grid; add `{need}:` to it in the space file, "
            "or use --sampler random/tpe"
        )

    def probes(self) -> list[Any]:
        """Values used to check the key against the recipe schema before the sweep starts."""
        if self.type == "categorical":
            return list(self.choices)
        return [self.low, self.high]


def _number(v: Any, what: str, integer: bool = False) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise ExperimentError(f"{what} must be {'an integer' if integer else 'a number'}, got {v!r}")
    return v


def parse_space(data: Any, source: str = "space") -> list[ParamSpec]:
    """Validate a space mapping (as read from YAML) into :class:`ParamSpec` objects (no recipe check).

    >>> [p.type for p in parse_space({"optim.lr": {"type": "log", "low": 1e-3, "high": 1.0},
    ...                                "optim.name": {"type": "categorical", "choices": ["sgd", "adamw"]}})]
    ['log', 'categorical']
    >>> parse_space({"optim.lr": {"type": "log", "low": 0, "high": 1}})
    Traceback (most recent call last):
    ...
    trickbag.experiments.ExperimentError: space: 'optim.lr': a log range needs 0 < low < high, got low=0, high=1
    """
    if not isinstance(data, dict) or not data:
        raise ExperimentError(
            f"{source} must be a non-empty mapping of recipe keys to distributions, e.g. "
            "'optim.lr: {type: log, low: 1.0e-3, high: 0.3}'"
        )
    specs = []
    for key, spec in data.items():
        if not isinstance(key, str) or not key:
            raise ExperimentError(f"{source}: keys must be dotted recipe keys such as optim.lr, got {key!r}")
        where = f"{source}: {key!r}"
        if key.split(".")[0] == "run":
            raise ExperimentError(f"{where}: run.* keys are set by the sweep itself and cannot be searched")
        if not isinstance(spec, dict):
            raise ExperimentError(f"{where} must map to {{type: ..., ...}}, got {spec!r}")
        extra = set(spec) - _FIELDS
        if extra:
            raise ExperimentError(f"{where}: unknown field(s) {', '.join(sorted(map(str, extra)))}; "
                                  f"allowed: {', '.join(sorted(_FIELDS))}")
        typ = spec.get("type")
        if typ not in TYPES:
            close = difflib.get_close_matches(str(typ), TYPES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ExperimentError(f"{where}: type {typ!r} is not allowed{hint}; allowed: {', '.join(TYPES)}")
        if typ == "categorical":
            choices = spec.get("choices")
            if not isinstance(choices, list) or not choices:
                raise ExperimentError(f"{where}: a categorical needs a non-empty list `choices`")
            bad = [c for c in choices if not (c is None or isinstance(c, (bool, int, float, str)))]
            if bad:
                raise ExperimentError(f"{where}: choices must be numbers, strings, booleans or null, got {bad[0]!r}")
            if "low" in spec or "high" in spec or "step" in spec:
                raise ExperimentError(f"{where}: a categorical takes `choices` only, not low/high/step")
            specs.append(ParamSpec(key, "categorical", choices=tuple(choices)))
            continue
        if "choices" in spec:
            raise ExperimentError(f"{where}: `choices` belongs to type categorical, not {typ}")
        if "low" not in spec or "high" not in spec:
            raise ExperimentError(f"{where}: type {typ} needs `low` and `high`")
        integer = typ == "int"
        low = _number(spec["low"], f"{where}: low", integer)
        high = _number(spec["high"], f"{where}: high", integer)
        step = spec.get("step")
        num = spec.get("num")
        if typ == "log":
            if not 0 < low < high:
                raise ExperimentError(f"{where}: a log range needs 0 < low < high, got low={low}, high={high}")
            if step is not None:
                raise ExperimentError(f"{where}: a log range takes no `step` (use `num` for grid points)")
            if num is not None and (isinstance(num, bool) or not isinstance(num, int) or num < 2):
                raise ExperimentError(f"{where}: num must be an integer >= 2, got {num!r}")
        else:
            if num is not None:
                raise ExperimentError(f"{where}: `num` is for type log; use `step` for {typ}")
            if (integer and not low <= high) or (not integer and not low < high):
                raise ExperimentError(f"{where}: need low {'<=' if integer else '<'} high, got low={low}, high={high}")
            if step is not None:
                _number(step, f"{where}: step", integer)
                if not step > 0:
                    raise ExperimentError(f"{where}: step must be > 0, got {step}")
        specs.append(ParamSpec(key, typ, low, high, step, num))
    return specs


def load_space(path: str | os.PathLike, recipe: Any = None) -> list[ParamSpec]:
    """Read a search-space YAML file; with ``recipe`` (a Recipe) also check every key and bound against it.

    Raises :class:`ExperimentError` (one line) for a missing file, bad YAML, a bad distribution, or a
    key / value the recipe schema refuses (with the schema's own message, e.g. a close-match hint).
    """
    path = Path(path)
    if not path.is_file():
        raise ExperimentError(f"--space {str(path)!r} does not exist; give a YAML file of recipe keys to search")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ExperimentError(f"--space {str(path)!r} is not valid YAML{where}") from None
    specs = parse_space(data, source=f"space {path.name}")
    if recipe is not None:
        base = recipe.model_dump(mode="json")
        for p in specs:
            for value in p.probes():
                _recipe_with(base, {p.key: value}, f"space {path.name}: {p.key}={value!r}")
    return specs


def _recipe_with(base: dict[str, Any], params: dict[str, Any], what: str = "") -> Any:
    from trickbag.config import apply_overrides, recipe_from_dict
    from trickbag.errors import RecipeError

    try:
        return recipe_from_dict(apply_overrides(base, [(k.split("."), v) for k, v in params.items()]))
    except RecipeError as exc:
        raise ExperimentError(f"{what}: {exc}" if what else str(exc)) from None


# --------------------------------------------------------------------------- pruning plug-in
class PruningReporter(Plugin):
    """Report ``metric`` to an Optuna trial after every epoch; stop the run when the pruner says so.

    The value of ``state.metrics[metric]`` at EPOCH_END is reported with ``step = epoch`` (0-based).
    When ``trial.should_prune()`` is true, the run is stopped (``state.stop``) and :attr:`pruned`
    is set; the caller then raises ``optuna.TrialPruned`` (raising inside the loop would skip the
    other plug-ins' epoch-end work, such as writing metrics.csv).

    >>> class FakeTrial:
    ...     def report(self, value, step): self.last = (value, step)
    ...     def should_prune(self): return True
    >>> PruningReporter(FakeTrial(), "val/acc").pruned
    False
    """

    def __init__(self, trial: Any, metric: str) -> None:
        self.trial = trial
        self.metric = metric
        self.pruned = False
        self.reported: list[tuple[int, float]] = []

    def on_epoch_end(self, state: Any) -> None:
        value = state.metrics.get(self.metric)
        if value is None:
            return
        value = float(value)
        self.trial.report(value, step=int(state.epoch))
        self.reported.append((int(state.epoch), value))
        if self.trial.should_prune():
            self.pruned = True
            state.stop(f"pruned by the sweep at epoch {state.epoch + 1} ({self.metric}={value:.4g})")


# --------------------------------------------------------------------------- the sweep
@dataclasses.dataclass
class SweepResult:
    """Outcome of :func:`run_sweep`."""

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


def _storage_url(storage: Optional[str], out_dir: Path) -> str:
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


def _objective(
    trial: Any,
    *,
    optuna: Any,
    base: dict[str, Any],
    specs: list[ParamSpec],
    metric: str,
    direction: str,
    trials_dir: Path,
    stream: TextIO,
) -> float:
    from trickbag.config import recipe_to_yaml
    from trickbag._files import atomic_write_text
    from trickbag.train.build import build
    from trickbag.train.builtin import CSVLogger

    params = {p.key: p.suggest(trial) for p in specs}
    name = f"trial-{trial.number:04d}"
    run_dir = trials_dir / name
    recipe = _recipe_with(base, {**params, "run.dir": str(trials_dir), "run.name": name, "run.progress": False},
                          f"trial {trial.number}")
    t0 = time.perf_counter()
    trainer, _ = build(recipe, run_dir=run_dir)
    reporter = PruningReporter(trial, metric)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "recipe.yaml", recipe_to_yaml(recipe))
    trainer.add_plugin(CSVLogger(run_dir / "metrics.csv", every_steps=recipe.log.every_steps))
    trainer.add_plugin(reporter)
    state = trainer.fit()
    wall = time.perf_counter() - t0
    trial.set_user_attr("run_dir", str(run_dir))
    trial.set_user_attr("wall_time_s", wall)
    shown = ", ".join(f"{k}={_show(v)}" for k, v in params.items())
    if reporter.pruned:
        last = reporter.reported[-1][1]
        print(f"trial {trial.number}: pruned after epoch {len(state.history)} ({metric} {last:.4g}; {shown}) "
              f"{wall:.1f} s", file=stream, flush=True)
        raise optuna.TrialPruned()
    values = [h[metric] for h in state.history if metric in h and math.isfinite(h[metric])]
    if not values:
        keys = sorted({k for h in state.history for k in h})
        raise ExperimentError(f"--metric {metric!r} was not reported by trial {trial.number}; "
                              f"per-epoch keys: {', '.join(keys) or '(none)'}")
    value = max(values) if direction == "maximize" else min(values)
    print(f"trial {trial.number}: {metric} {value:.4g} ({shown}) {wall:.1f} s", file=stream, flush=True)
    return value


def _show(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def run_sweep(
    recipe: str,
    space: str | os.PathLike,
    *,
    sampler: Literal["grid", "random", "tpe"] = "tpe",
    trials: int = 20,
    storage: Optional[str] = None,
    study_name: Optional[str] = None,
    resume: bool = False,
    metric: str = "val/acc",
    direction: Optional[Literal["maximize", "minimize"]] = None,
    out: Optional[str | os.PathLike] = None,
    overrides: Sequence[str] = (),
    seed: int = 0,
    pruner: Literal["median", "none"] = "median",
    startup_trials: int = 2,
    stream: Optional[TextIO] = None,
) -> SweepResult:
    """Run ``trials`` trials of a sweep (new study, or more trials of an existing one with ``resume``).

    Args:
        recipe: built-in recipe name or YAML path; ``overrides`` apply to every trial.
        space: search-space YAML file (see the module docstring).
        sampler: ``grid``, ``random`` or ``tpe`` (seeded with ``seed`` + trials already in the study).
        trials: trials to run in this call (a grid stops early when exhausted).
        storage: Optuna storage URL or ``.db`` path (default ``sqlite:///OUT/sweep.db``).
        study_name: default ``<recipe name>-sweep``.
        resume: load the study if it exists (required when it does) and add trials to it.
        metric: per-epoch metric (``val/*`` or ``train/*``) whose best value over epochs is the objective.
        direction: ``maximize`` / ``minimize``; default minimize for keys ending in ``loss``.
        out: sweep folder (default ``<run.dir>/sweep-<study name>``).
        pruner: ``median`` (Optuna MedianPruner, after ``startup_trials`` finished trials) or ``none``.
    """
    from trickbag.config import load_recipe, recipe_to_yaml
    from trickbag._files import atomic_write_text
    from trickbag.experiments.report import csv_text, markdown_table

    stream = stream if stream is not None else sys.stderr
    optuna = _optuna()
    if sampler not in ("grid", "random", "tpe"):
        raise ExperimentError(f"--sampler {sampler!r} is not allowed; allowed: grid, random, tpe")
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
    if direction not in ("maximize", "minimize"):
        raise ExperimentError(f"--direction {direction!r} is not allowed; allowed: maximize, minimize")
    base_recipe = load_recipe(recipe, list(overrides))
    if metric.startswith("val/") and base_recipe.data.val_fraction == 0:
        raise ExperimentError(f"--metric {metric!r} needs a validation split, but data.val_fraction=0")
    specs = load_space(space, base_recipe)
    base = base_recipe.model_dump(mode="json")
    study_name = study_name or f"{base_recipe.name}-sweep"
    out_dir = Path(out) if out is not None else Path(base_recipe.run.dir) / f"sweep-{study_name}"
    if out_dir.exists() and not out_dir.is_dir():
        raise ExperimentError(f"--out {str(out_dir)!r} is a file; give a folder for the sweep")
    out_dir.mkdir(parents=True, exist_ok=True)
    url = _storage_url(storage, out_dir)
    grid = {p.key: p.grid() for p in specs} if sampler == "grid" else None
    settings = {
        "recipe": {k: v for k, v in base.items() if k != "run"},
        "space": [dataclasses.asdict(p) for p in specs],
        "metric": metric,
        "direction": direction,
    }
    settings = json.loads(json.dumps(settings))
    try:
        with warnings.catch_warnings():  # heartbeats (stale trials of killed processes -> FAIL) are "experimental"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            rdb = optuna.storages.RDBStorage(url, heartbeat_interval=60, grace_period=180)
    except Exception as exc:  # bad URL, unwritable file, missing driver
        raise ExperimentError(f"--storage {url!r} cannot be opened: {str(exc).splitlines()[0]}") from None
    existing = {s.study_name: s.n_trials for s in optuna.get_all_study_summaries(rdb, include_best_trial=False)}
    if study_name in existing and not resume:
        raise ExperimentError(
            f"study {study_name!r} already exists in {url}; add --resume to continue it, or choose --study-name"
        )
    pr = (optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=0)
          if pruner == "median" else optuna.pruners.NopPruner())
    n_before = existing.get(study_name, 0)
    sampler_seed = seed + n_before  # a resumed random/TPE sampler must not replay the first trials
    if sampler == "grid":
        smp = optuna.samplers.GridSampler(grid, seed=sampler_seed)
    elif sampler == "random":
        smp = optuna.samplers.RandomSampler(seed=sampler_seed)
    else:
        smp = optuna.samplers.TPESampler(seed=sampler_seed)
    study = optuna.create_study(storage=rdb, study_name=study_name, direction=direction, pruner=pr,
                                sampler=smp, load_if_exists=True)
    saved = study.user_attrs.get("trickbag")
    if saved is None:
        study.set_user_attr("trickbag", settings)
    elif saved != settings:
        what = [k for k in settings if saved.get(k) != settings[k]]
        raise ExperimentError(
            f"study {study_name!r} in {url} was started with a different {', '.join(what)}; "
            "resume it with the same recipe, overrides, space and metric, or choose another --study-name"
        )
    print(
        f"sweep {study_name!r} ({sampler}, {len(specs)} parameter{'s' if len(specs) != 1 else ''}, "
        f"{direction} {metric}): {n_before} trials already in {url}; running {trials} more",
        file=stream,
        flush=True,
    )
    trials_dir = out_dir / "trials"
    ran: list[int] = []

    from trickbag.errors import TrickbagError

    def objective(trial: Any) -> float:
        ran.append(trial.number)
        try:
            return _objective(trial, optuna=optuna, base=base, specs=specs, metric=metric, direction=direction,
                              trials_dir=trials_dir, stream=stream)
        except TrickbagError as exc:  # this combination of values is refused: the trial fails, the sweep goes on
            msg = " ".join(str(exc).split())
            trial.set_user_attr("error", msg)
            print(f"trial {trial.number}: failed: {msg}", file=stream, flush=True)
            raise

    study.optimize(objective, n_trials=trials, catch=(TrickbagError,), gc_after_trial=False)
    all_trials = study.trials
    TS = optuna.trial.TrialState
    counts = {s.name: sum(1 for t in all_trials if t.state == s) for s in (TS.COMPLETE, TS.PRUNED, TS.FAIL, TS.RUNNING)}
    complete = [t for t in all_trials if t.state == TS.COMPLETE and t.value is not None]
    if not complete:
        reasons = [t.user_attrs["error"] for t in all_trials if t.state == TS.FAIL and "error" in t.user_attrs]
        raise ExperimentError(
            f"study {study_name!r} has no finished trial ({counts['PRUNED']} pruned, {counts['FAIL']} failed)"
            + (f"; last failure: {reasons[-1]}" if reasons else "")
        )
    best = study.best_trial
    best_recipe = _recipe_with(base, {**best.params, "run.name": None})
    best_path = out_dir / "best_recipe.yaml"
    header = (f"# best trial {best.number} of sweep {study_name!r}: {metric} = {best.value:.6g} ({direction})\n"
              f"# params: {json.dumps(best.params)}\n# train it: trickbag train {best_path}\n")
    atomic_write_text(best_path, header + recipe_to_yaml(best_recipe))
    # table of the top trials
    reverse = direction == "maximize"
    top = sorted(complete, key=lambda t: t.value, reverse=reverse)[:10]
    keys = [p.key for p in specs]
    headers = ["rank", "trial", metric] + keys + ["epochs", "time (s)"]
    rows = []
    for i, t in enumerate(top, 1):
        rows.append([str(i), str(t.number), t.value] + [_show(t.params.get(k)) for k in keys]
                    + [str(len(t.intermediate_values)), f"{t.user_attrs.get('wall_time_s', math.nan):.1f}"])
    summary = ", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v)
    md = markdown_table(headers, rows) + f"\n\ntrials: {summary}; best trial {best.number}."
    files = [best_path, out_dir / "trials.md", out_dir / "trials.csv"]
    atomic_write_text(files[1], md + "\n")
    csv_rows = [[t.number, t.state.name, t.value] + [t.params.get(k) for k in keys]
                + [len(t.intermediate_values), t.user_attrs.get("wall_time_s")] for t in all_trials]
    atomic_write_text(files[2], csv_text(["trial", "state", metric] + keys + ["epochs", "time_s"], csv_rows))
    files.append(plot_history(all_trials, TS, metric, direction, out_dir / "history.png"))
    importances: dict[str, float] = {}
    if len(specs) >= 2 and len(complete) >= MIN_TRIALS_FOR_IMPORTANCE:
        try:
            importances = optuna.importance.get_param_importances(study)
        except (RuntimeError, ValueError) as exc:  # e.g. a parameter that never varied
            print(f"parameter importances skipped: {exc}", file=stream)
        if importances:
            files.append(plot_importances(importances, out_dir / "importances.png"))
    return SweepResult(study_name, url, out_dir, metric, direction, best.number, float(best.value),
                       dict(best.params), best_path, counts, md, files, ran, importances)


def plot_history(trials: Sequence[Any], TS: Any, metric: str, direction: str, path: Path) -> Path:
    """Objective of every finished trial, last reported value of pruned ones, and the best so far."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trickbag._files import atomic_save_figure

    fig, ax = plt.subplots(figsize=(7, 4.2))
    done = [(t.number, t.value) for t in trials if t.state == TS.COMPLETE and t.value is not None]
    pruned = [(t.number, t.intermediate_values[max(t.intermediate_values)]) for t in trials
              if t.state == TS.PRUNED and t.intermediate_values]
    if done:
        ax.plot(*zip(*done), "o", color="C0", label="finished trial")
        best, bests = None, []
        for n, v in sorted(done):
            best = v if best is None else (max(best, v) if direction == "maximize" else min(best, v))
            bests.append((n, best))
        ax.step(*zip(*bests), where="post", color="C3", label="best so far")
    if pruned:
        ax.plot(*zip(*pruned), "x", color="C7", label="pruned (last value)")
    ax.set_xlabel("trial")
    ax.set_ylabel(metric)
    ax.set_title(f"optimisation history ({direction})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return atomic_save_figure(fig, path)


def plot_importances(importances: dict[str, float], path: Path) -> Path:
    """Horizontal bars of fANOVA importances (they sum to 1)."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trickbag._files import atomic_save_figure

    names = list(importances)[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(names) + 1.5))
    ax.barh(names, [importances[n] for n in names], color="C0")
    ax.set_xlabel("importance (fANOVA, normalised)")
    ax.set_title("parameter importances")
    ax.grid(alpha=0.3, axis="x")
    return atomic_save_figure(fig, path)
