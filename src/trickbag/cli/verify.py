"""``trickbag verify-resume``: prove on your recipe that a run killed with SIGKILL and resumed ends bit-identical.

Only argument parsing lives here; :mod:`trickbag.runs.verify` (and torch) is imported when the command runs.
"""

from __future__ import annotations

import argparse

from trickbag.cli._common import positive_int, split_recipe_and_overrides

__all__ = ["register"]

DESCRIPTION = """\
Prove that RECIPE resumes exactly: train it once uninterrupted and once SIGKILLed --kills times at
random points (each kill followed by `trickbag train --resume`), then compare every tensor of the
final checkpoints/last.pt and best.pt and every row of metrics.csv (timing columns ignored).
Prints a certificate (also written to OUT/certificate.md); exit 0 identical, 1 different, 2 bad input.
ITEMS: [RECIPE] [key.sub=value ...]. For kills that land mid-epoch, give step checkpoints, e.g.
train.checkpoint_every_steps=20. Exact resume is promised on the CPU with train.deterministic=true
and data.num_workers=0 (docs/reliability.md)."""


def cmd_verify_resume(args: argparse.Namespace) -> int:
    from trickbag.runs.verify import verify_resume

    recipe, overrides = split_recipe_and_overrides(args.items)
    cert = verify_resume(recipe, overrides, kills=args.kills, seed=args.seed, out=args.out)
    print(cert.render(limit=20), end="", flush=True)
    return cert.exit_code


def register(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("verify-resume", help="prove a recipe resumes bit-identically after SIGKILLs",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("items", nargs="*", metavar="ITEMS", help="a recipe name or YAML file, then key.sub=value overrides")
    v.add_argument("--kills", type=positive_int, default=3, metavar="N", help="SIGKILLs of the second run (default 3)")
    v.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the random kill points (default 0)")
    v.add_argument("--out", metavar="DIR",
                   help="folder for both runs, their logs and certificate.md (default ./verify-resume-<recipe>, "
                        "a fresh name if it exists)")
    v.set_defaults(func=cmd_verify_resume)
