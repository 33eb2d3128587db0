"""``trickbag train``: train a recipe, or continue a run with ``--resume``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from trickbag.cli._common import split_recipe_and_overrides
from trickbag.errors import TrickbagError

__all__ = ["register"]


def cmd_train(args: argparse.Namespace) -> int:
    from trickbag.recipe import load_recipe

    recipe_name, overrides = split_recipe_and_overrides(args.items)
    line: str | None = None  # what was chosen for the user (the recipe, the image size), said on stderr
    if args.resume is not None and not args.resume.strip():
        raise TrickbagError("--resume needs a run directory, got an empty string")
    if args.resume:
        if recipe_name is not None:
            raise TrickbagError(
                f"--resume takes the recipe from the run directory; drop {recipe_name!r} (overrides are allowed)"
            )
        from trickbag.recipe import load_run_recipe

        recipe = load_run_recipe(Path(args.resume), overrides)
    else:
        from trickbag.runs.pick import fit_recipe

        named = recipe_name is not None
        # no recipe named: the one that fits data.name (csv: tabular, imagefolder: imagefolder-scratch, sized
        # from the images); the user's overrides still win
        recipe_name, fitted, line = fit_recipe(recipe_name, overrides)
        overrides = [*fitted, *overrides]
        recipe = load_recipe(recipe_name, overrides)  # bad input fails here, before the heavy imports
        if not named and recipe.run.name is None and recipe.data.name != load_recipe().data.name:
            # the default recipe on the user's data: the run is named after the data, not after 'digits'
            from trickbag.runs.naming import default_run_name

            recipe.run.name = default_run_name(recipe, after_data=True)
            overrides = [*overrides, f"run.name={recipe.run.name}"]  # the launcher names its workers' run so
    if recipe.dist.nproc > 1 and "LOCAL_RANK" not in os.environ:
        from trickbag.launch import launch_torchrun

        _say_choice(line, args.quiet)
        return launch_torchrun(recipe_name, overrides, recipe.dist.nproc, quiet=args.quiet, resume=args.resume)
    from trickbag.launch import launched_worker
    from trickbag.plugin.state import StopReason
    from trickbag.runs.run import resume_run, run_recipe
    from trickbag.train.plugins.signals import hold_signals

    if launched_worker():  # a Ctrl-C passed on while this rank still builds: stop after the first update, saved
        hold_signals()

    if args.resume:
        result = resume_run(Path(args.resume), overrides, quiet=args.quiet)
    else:
        # the choice is said once the run starts: input refused before that stays one line
        result = run_recipe(recipe, quiet=args.quiet, plugins=[_say_on_start(line, args.quiet)] if line else [])
    if result.interrupted:
        return _interrupted(result)
    if result.stop_reason is StopReason.NONFINITE:
        kept = ", ".join(f"{n} (update {u})" for n, u in sorted(result.checkpoints.items()))
        where = (f"the last good state is {kept} in {result.run_dir}/checkpoints" if kept else
                 "no checkpoint was written before it diverged, so --resume restarts it from the beginning")
        print(f"trickbag: error: training stopped: {result.stop_message}; {where}; continue with a lower learning "
              f"rate: trickbag train --resume {result.run_dir} optim.lr=...", file=sys.stderr)
        return 1
    return 0


def _say_choice(line: str | None, quiet: bool) -> None:
    if line is not None and not quiet:
        print(f"trickbag: {line}", file=sys.stderr, flush=True)


def _say_on_start(line: str | None, quiet: bool) -> Any:
    """A plug-in that says ``line`` on stderr when training starts (not on a resumed session's start)."""
    from trickbag.plugin.interface import Plugin

    class SayOnStart(Plugin):
        name = "recipe_choice"

        def on_fit_start(self, state: Any) -> None:
            if state.step == 0:
                _say_choice(line, quiet)

    return SayOnStart()


def _interrupted(result: Any) -> int:
    """One line with the resume command (from rank 0); 128 + the signal's number (130 SIGINT, 143 SIGTERM), or 0
    in a worker of ``dist.nproc=N``, whose launcher reports the interruption for the whole job."""
    import signal

    from trickbag import runtime
    from trickbag.launch import launched_worker
    from trickbag.train.plugins.signals import GracefulInterrupt

    if runtime.dist_info().is_main:
        print(f"trickbag: interrupted; continue with: trickbag train --resume {result.run_dir}", file=sys.stderr)
    if launched_worker():
        return 0
    signums = [p.signum for p in result.plugins if isinstance(p, GracefulInterrupt) and p.signum is not None]
    return 128 + (signums[0] if signums else signal.SIGINT)


def cmd_cooldown(args: argparse.Namespace) -> int:
    from trickbag.runs.cooldown import branch_cooldown

    result = branch_cooldown(Path(args.run), args.epochs, checkpoint=args.source, name=args.name, quiet=args.quiet)
    if not args.quiet:
        print(f"cooldown: {result.run_dir}", flush=True)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("train", help="train a recipe (default: the one that fits data.name, else digits)",
                       description="Train a recipe. ITEMS: [RECIPE] [key.sub=value ...]",
                       epilog="Every recipe key, its type, default and allowed values: trickbag recipes --keys "
                       "(also docs/recipes.md). Exit status: 0 done, 1 training failed (the run directory holds "
                       "the log), 2 bad input (nothing written), 130 / 143 interrupted by SIGINT / SIGTERM (resume).")
    t.add_argument("items", nargs="*", metavar="ITEMS", help="a recipe name or YAML file, then key.sub=value overrides")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint")
    t.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    t.set_defaults(func=cmd_train)
    c = sub.add_parser("cooldown", help="branch a cooldown off a schedule.name=wsd run: decay from one of its "
                       "checkpoints, in a new run folder",
                       description="Copy a checkpoint of a wsd run into a new run folder beside it and train on with "
                       "the decay starting at that update (schedule.decay_fraction=1.0) until the end of epoch "
                       "--epochs. The original run is not changed.")
    c.add_argument("run", metavar="RUN_DIR", help="the wsd run to branch from")
    c.add_argument("--epochs", type=int, required=True, help="the cooldown ends at the end of this epoch")
    c.add_argument("--from", dest="source", metavar="CHECKPOINT",
                   help="step-N.pt or last.pt of RUN_DIR/checkpoints, or a path (default: the newest)")
    c.add_argument("--name", help="the new run folder's name (default: RUN-cooldown-UPDATE)")
    c.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    c.set_defaults(func=cmd_cooldown)
