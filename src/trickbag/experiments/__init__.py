"""Experiments over recipes: trick ablations, hyper-parameter sweeps, the LR range test, run reports.

Each has a command (``trickbag ablate``, ``trickbag sweep``, ``trickbag lr-find``, ``trickbag report``)
and a function. Ablation cells, sweep trials and the LR range test are all runs of the one run path,
:func:`trickbag.runs.run.run_recipe`; they differ in the plug-ins they add. One package or module
per job: :mod:`.ablate`, :mod:`.sweep`, :mod:`.lr_range`, :mod:`.report`, :mod:`.stats`.
The functions are loaded lazily, so importing this package (and the CLI) is cheap:

>>> import trickbag.experiments as ex
>>> ex.paired_difference.__module__
'trickbag.experiments.stats'
>>> callable(ex.lr_find), ex.lr_find.__module__
(True, 'trickbag.experiments.lr_range.loop')
"""

from __future__ import annotations

from trickbag._optional import lazy_exports
from trickbag.errors import TrickbagError

__all__ = [
    "ExperimentError",
    "mean_sd",
    "paired_difference",
    "PairedDifference",
    "parse_tricks",
    "ablation_variants",
    "run_ablation",
    "AblationResult",
    "load_space",
    "run_sweep",
    "SweepResult",
    "PruningReporter",
    "lr_find",
    "LRFinder",
    "RangeTest",
    "lr_find_recipe",
    "LRFindResult",
    "smooth_losses",
    "suggest_lr",
    "plot_lr_find",
    "compare_runs",
    "write_report",
    "RunComparison",
]


class ExperimentError(TrickbagError, ValueError):
    """Bad input to an experiment command (tricks, seeds, search space, run folders); CLI exit 2."""


_EXPORTS: dict[str, str] = {
    "mean_sd": "trickbag.experiments.stats",
    "paired_difference": "trickbag.experiments.stats",
    "PairedDifference": "trickbag.experiments.stats",
    "parse_tricks": "trickbag.experiments.ablate",
    "ablation_variants": "trickbag.experiments.ablate",
    "run_ablation": "trickbag.experiments.ablate",
    "AblationResult": "trickbag.experiments.ablate",
    "load_space": "trickbag.experiments.sweep",
    "run_sweep": "trickbag.experiments.sweep",
    "SweepResult": "trickbag.experiments.sweep",
    "PruningReporter": "trickbag.experiments.sweep",
    "lr_find": "trickbag.experiments.lr_range",
    "LRFinder": "trickbag.experiments.lr_range",
    "RangeTest": "trickbag.experiments.lr_range",
    "lr_find_recipe": "trickbag.experiments.lr_range",
    "LRFindResult": "trickbag.experiments.lr_range",
    "smooth_losses": "trickbag.experiments.lr_range",
    "suggest_lr": "trickbag.experiments.lr_range",
    "plot_lr_find": "trickbag.experiments.lr_range",
    "compare_runs": "trickbag.experiments.report",
    "write_report": "trickbag.experiments.report",
    "RunComparison": "trickbag.experiments.report",
}


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
