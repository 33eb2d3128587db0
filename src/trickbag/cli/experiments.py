"""``trickbag ablate``, ``sweep``, ``lr-find``, ``report``: experiments over recipes.

Only argument parsing lives here; the experiment modules are imported inside the command functions.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trickbag.cli._common import positive_float, positive_int, split_recipe_and_overrides
from trickbag.experiments import ExperimentError

__all__ = ["register"]


def _needs_plots(command: str) -> None:
    from trickbag._optional import require

    require("matplotlib", extra="app", feature=f"trickbag {command} (its plots)")


def _recipe_and_overrides(items: list[str]) -> tuple[str, list[str]]:
    """``RECIPE key=value ...``; the recipe defaults to the built-in ``digits``."""
    recipe, overrides = split_recipe_and_overrides(items, default="digits")
    return str(recipe), overrides


def _options(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The parsed options ``names`` as keyword arguments of the experiment function."""
    return {name: getattr(args, name) for name in names}


# --------------------------------------------------------------------------- commands
def cmd_ablate(args: argparse.Namespace) -> int:
    _needs_plots("ablate")
    from trickbag.experiments.ablate import run_ablation

    recipe, overrides = _recipe_and_overrides(args.items)
    res = run_ablation(recipe, args.tricks, overrides=overrides,
                       **_options(args, "seeds", "mode", "fraction", "jobs", "out", "metric"))
    print(res.markdown)
    print("\nwritten: " + ", ".join(str(p) for p in res.files))
    if res.failed:
        raise ExperimentError(
            f"{len(res.failed)} cell(s) failed ({', '.join(res.failed[:3])}"
            f"{', ...' if len(res.failed) > 3 else ''}): {res.cells[res.failed[0]]['message']}; "
            f"logs in {res.out_dir / 'logs'}; rerun the same command to retry them"
        )
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    _needs_plots("sweep")
    from trickbag.experiments.sweep import run_sweep

    recipe, overrides = _recipe_and_overrides(args.items)
    res = run_sweep(recipe, args.space, overrides=overrides, **_options(
        args, "sampler", "trials", "storage", "study_name", "resume", "metric", "direction", "out", "seed", "pruner"))
    print(res.markdown)
    print(f"\nbest: trial {res.best_trial} with {res.metric} = {res.best_value:.6g}; recipe: {res.best_recipe}")
    print("written: " + ", ".join(str(p) for p in res.files))
    return 0


def cmd_lr_find(args: argparse.Namespace) -> int:
    _needs_plots("lr-find")
    from trickbag.experiments.lr_range import lr_find_recipe

    recipe, overrides = _recipe_and_overrides(args.items)
    res, files = lr_find_recipe(recipe, overrides,
                                **_options(args, "steps", "start", "end", "beta", "diverge", "rule", "out"))
    stop = f"stopped early ({res.stop_reason})" if res.stop_reason else "ran all steps"
    print(f"lr-find: {len(res.lrs)} steps from {res.lrs[0]:.3g} to {res.lrs[-1]:.3g}; {stop}")
    print(f"suggested lr {res.suggestion:.3g}  (rule: {res.rule_text})")
    if res.warning:
        print(f"trickbag: warning: the suggestion is unreliable: {res.warning}; look at the plot", file=sys.stderr)
    print("written: " + ", ".join(str(p) for p in files))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    _needs_plots("report")
    from trickbag.experiments.report import write_report

    comparison = write_report(args.runs, args.out)
    for note in comparison.skipped:
        print(f"trickbag: note: {note}", file=sys.stderr)
    print(comparison.markdown())
    out = Path(args.out)
    print("\nwritten: " + ", ".join(str(out / f) for f in ("table.md", "table.csv", "curves.png", "report.html")))
    return 0


# --------------------------------------------------------------------------- registration
_ITEMS_HELP = "a recipe name or YAML file, then key.sub=value overrides"


def _recipe_command(sub: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], int],
                    help: str, description: str) -> argparse.ArgumentParser:
    """The parser of a command over one recipe: ``ITEMS`` = ``[RECIPE] [key.sub=value ...]``, run by ``func``."""
    p = sub.add_parser(name, help=help, description=description)
    p.add_argument("items", nargs="*", metavar="ITEMS", help=_ITEMS_HELP)
    p.set_defaults(func=func)
    return p


def _add_ablate(sub: argparse._SubParsersAction) -> None:
    a = _recipe_command(
        sub, "ablate", cmd_ablate,
        help="which tricks help: leave-one-out / add-one / factorial ablation over seeds, with confidence intervals",
        description="Train every variant of RECIPE with the listed tricks switched on/off, over several seeds, "
        "and compare each with the reference, seed by seed; --mode factorial estimates each trick's main effect "
        "and every two-way interaction. ITEMS: [RECIPE] [key.sub=value ...]. "
        "Rerunning with the same arguments resumes (finished cells are kept).",
    )
    a.add_argument("--tricks", required=True, help="comma-separated trick names or true/false recipe keys, "
                   "e.g. mixup,ema,label_smoothing,data.augment")
    a.add_argument("--seeds", type=positive_int, default=3, help="seeds per variant (train.seed=0..N-1; default 3)")
    a.add_argument("--mode", choices=["leave-one-out", "add-one", "factorial"], default="leave-one-out",
                   help="leave-one-out: all on, each off, all off (reference: all on); "
                   "add-one: baseline and each alone (reference: baseline); "
                   "factorial: every on/off combination (2^k runs per seed): main effects and two-way interactions")
    a.add_argument("--fraction", default="1",
                   help="--mode factorial: run a regular fraction 1/2, 1/4, ... of the 2^k design, of resolution V or "
                   "more (refused where the number of tricks cannot reach it); default 1 (the full design)")
    a.add_argument("--jobs", type=positive_int, default=1, help="runs trained at the same time (processes)")
    a.add_argument("--out", help="ablation folder (default <run.dir>/ablate-<recipe>)")
    a.add_argument("--metric", default="test/acc",
                   help="test/<name> of best.pt, or a per-epoch key (last epoch); default test/acc")


def _add_sweep(sub: argparse._SubParsersAction) -> None:
    s = _recipe_command(
        sub, "sweep", cmd_sweep,
        help="hyper-parameter search with Optuna (grid / random / TPE), pruning, SQLite resume",
        description="Search recipe keys given in a space YAML ({key: {type: float|log|int|categorical, low, high, "
        "step, num, choices}}); every trial is a full run (checkpoints, test, summary). "
        "ITEMS: [RECIPE] [key.sub=value ...]. Needs the 'sweep' extra (optuna).",
    )
    s.add_argument("--space", required=True, help="search space YAML file")
    s.add_argument("--sampler", choices=["grid", "random", "tpe"], default="tpe")
    s.add_argument("--trials", type=positive_int, default=20,
                   help="trials run by this process (default 20; a grid runs at most its unvisited points)")
    s.add_argument("--storage", help="Optuna storage URL or .db file (default sqlite:///<out>/sweep.db)")
    s.add_argument("--study-name", help="study name (default <recipe>-sweep)")
    s.add_argument("--resume", action="store_true",
                   help="continue the study in the storage (or join it from another process)")
    s.add_argument("--metric", default="val/acc", help="per-epoch metric to optimise (default val/acc)")
    s.add_argument("--direction", choices=["maximize", "minimize"], help="default: minimize for */loss, else maximize")
    s.add_argument("--pruner", choices=["median", "none"], default="median",
                   help="median: stop a trial whose epoch value is worse than the median of earlier trials "
                        "(after the first quarter of the epochs)")
    s.add_argument("--seed", type=int, default=0, help="sampler seed")
    s.add_argument("--out", help="sweep folder (default <run.dir>/sweep-<study name>)")


def _add_lr_find(sub: argparse._SubParsersAction) -> None:
    lf = _recipe_command(
        sub, "lr-find", cmd_lr_find,
        help="LR range test (Smith 2017): loss vs exponentially growing LR, with a suggested LR",
        description="Train RECIPE (with all its tricks, precision and optimizer) for a few hundred updates with "
        "the LR growing exponentially from --start to --end, smooth the loss, stop on divergence, suggest an "
        "LR and plot loss vs LR. Nothing else is written. ITEMS: [RECIPE] [key.sub=value ...]",
    )
    lf.add_argument("--steps", type=positive_int, default=200, help="optimizer updates of the test (default 200)")
    lf.add_argument("--start", type=positive_float, default=1e-6, help="first LR (default 1e-6)")
    lf.add_argument("--end", type=positive_float, default=10.0, help="last LR (default 10)")
    lf.add_argument("--beta", type=float, default=0.9, help="loss smoothing factor of the EMA (default 0.9)")
    lf.add_argument("--diverge", type=positive_float, default=4.0,
                    help="stop when the smoothed loss exceeds this many times its minimum (default 4)")
    lf.add_argument("--rule", choices=["valley", "steepest", "min10"], default="valley",
                    help="valley (fastai's default): two thirds down the longest falling stretch of the smoothed loss; "
                    "steepest: steepest descent of the smoothed loss vs log LR; min10: LR at the minimum / 10")
    lf.add_argument("--out", help="folder for lr_find.png / lr_find.csv (default ./lr-find-<recipe>)")


def _add_report(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "report",
        help="compare runs: recipe differences, best metrics, time; curves plot; self-contained HTML",
        description="Compare run directories: one table (recipe keys that differ, best metrics, test accuracy, "
        "time) and one overlaid curves plot, written as Markdown, CSV, PNG and a self-contained HTML page. "
        "Folders that are not run directories (no recipe.yaml) are skipped with a note.",
    )
    r.add_argument("runs", nargs="+", metavar="RUN_DIR")
    r.add_argument("--out", default="report", help="folder for the report (default ./report)")
    r.set_defaults(func=cmd_report)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the experiment commands to the ``trickbag`` parser."""
    for add in (_add_ablate, _add_sweep, _add_lr_find, _add_report):
        add(sub)
