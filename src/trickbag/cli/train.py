"""``trickbag train``: train a recipe, or continue a run with ``--resume``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from trickbag.cli._common import split_recipe_and_overrides
from trickbag.errors import TrickbagError

__all__ = ["register"]


def cmd_train(args: argparse.Namespace) -> int:
    from trickbag.config import load_recipe

    recipe_name, overrides = split_recipe_and_overrides(args.items)
    if args.resume:
        if recipe_name is not None:
            raise TrickbagError(
                f"--resume takes the recipe from the run directory; drop {recipe_name!r} (overrides are allowed)"
            )
        from trickbag.config import load_run_recipe

        recipe = load_run_recipe(Path(args.resume), overrides)
    else:
        recipe = load_recipe(recipe_name, overrides)  # bad input fails here, before the heavy imports
    if recipe.dist.nproc > 1 and "LOCAL_RANK" not in os.environ:
        from trickbag.launch import launch_torchrun

        return launch_torchrun(recipe_name, overrides, recipe.dist.nproc, quiet=args.quiet, resume=args.resume)
    from trickbag.train.run import resume_run, train_recipe

    if args.resume:
        result = resume_run(Path(args.resume), overrides, quiet=args.quiet)
    else:
        result = train_recipe(recipe, quiet=args.quiet)
    if result.interrupted:
        print(f"trickbag: interrupted; continue with: trickbag train --resume {result.run_dir}", file=sys.stderr)
        return 130
    from trickbag.train.nonfinite import STOP_PREFIX

    if result.stop_reason and result.stop_reason.startswith(STOP_PREFIX):
        print(f"trickbag: error: training stopped: {result.stop_reason}; the last good state is in "
              f"{result.run_dir}/checkpoints/last.pt (trickbag train --resume {result.run_dir})", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("train", help="train a recipe (default: digits)",
                       description="Train a recipe. ITEMS: [RECIPE] [key.sub=value ...]")
    t.add_argument("items", nargs="*", metavar="ITEMS", help="a recipe name or YAML file, then key.sub=value overrides")
    t.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its newest checkpoint")
    t.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    t.set_defaults(func=cmd_train)
