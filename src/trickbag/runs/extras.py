"""What a run needs beyond the core install, checked before anything is written."""

from __future__ import annotations

import sys
from typing import Any

from trickbag._optional import require

__all__ = ["check_run_extras"]


def check_run_extras(recipe: Any, *, write: bool = True, quiet: bool = False) -> None:
    """Raise one :class:`~trickbag.errors.MissingExtraError` line for the first optional package the run
    needs and lacks, naming the extra (``pip install 'trickbag[app]'``) and the key that turns it off."""
    needs = []
    if write and recipe.log.tensorboard:
        needs.append(("tensorboard", "TensorBoard logging (log.tensorboard=false turns it off)"))
    if write and recipe.run.plots:
        needs.append(("matplotlib", "run plots (run.plots=false turns them off)"))
    if write and recipe.run.progress and not quiet and sys.stderr.isatty():
        needs.append(("tqdm", "the progress bar (run.progress=false turns it off)"))
    for module, feature in needs:
        require(module, extra="app", feature=feature)
    if write and recipe.log.wandb:
        require("wandb", extra="wandb", feature="log.wandb=true (log.wandb=false turns it off)")
