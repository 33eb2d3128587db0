"""Hyper-parameter sweeps on Optuna: any recipe key, grid / random / TPE, median pruning, SQLite resume.

``trickbag sweep RECIPE --space space.yaml --sampler tpe --trials 30 --storage sqlite:///sweep.db``

* :mod:`.space` — the search space (a YAML mapping from dotted recipe keys to distributions),
  checked against the recipe schema before the first trial;
* :mod:`.study` — :func:`run_sweep`: the study, and each trial as one run on the run path
  (``OUT/trials/trial-NNNN``, a full run directory with checkpoints, test and summary);
* :mod:`.pruning` — :class:`PruningReporter`, the plug-in that reports the metric after every
  epoch and stops the run when the median pruner says so (the trial is then marked pruned);
* :mod:`.results` — ``best_recipe.yaml`` (the recipe with the best trial's values, ready for
  ``trickbag train``), ``trials.md`` / ``trials.csv`` (top trials / every trial), ``history.png``
  and ``importances.png`` (fANOVA, with at least 2 parameters and 4 finished trials).

Trials live in the Optuna storage (SQLite by default), so a killed sweep continues with
``--resume``, and several processes started with ``--resume`` share one study.
"""

from trickbag.experiments.sweep.pruning import PruningReporter
from trickbag.experiments.sweep.results import SweepResult
from trickbag.experiments.sweep.space import ParamSpec, load_space, parse_space
from trickbag.experiments.sweep.study import run_sweep

__all__ = ["ParamSpec", "parse_space", "load_space", "PruningReporter", "run_sweep", "SweepResult"]
