"""``trickbag cooldown``: branch a cooldown off a ``wsd`` run at one of its checkpoints.

A warmup-stable-decay run can stop its stable phase at any update and decay from there (Hägele et al. 2024); the
branch is a new run folder beside the original, holding a copy of the chosen checkpoint (with its shards under
FSDP), resumed with ``schedule.decay_fraction=1.0`` (the decay starts at the checkpoint's update) and
``train.epochs=E`` (it ends at the end of epoch E). The original run is not touched, so several cooldowns can
branch off the same run at different updates or lengths.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from trickbag.errors import CheckpointError, TrickbagError

__all__ = ["branch_cooldown"]


def _source(run_dir: Path, checkpoint: str | None) -> tuple[Path, dict[str, Any]]:
    from trickbag.train.checkpoint_files import load_checkpoint
    from trickbag.train.plugins.run_folder import find_resume_checkpoint

    if checkpoint is None:
        found = find_resume_checkpoint(run_dir)
        if found is None:
            raise TrickbagError(f"run {run_dir} has no checkpoint yet to branch a cooldown from")
        return found[0], found[1]
    path = Path(checkpoint)
    path = path if path.is_file() else run_dir / "checkpoints" / checkpoint
    if not path.is_file():
        have = sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt") if p.name != "best.pt")
        raise TrickbagError(f"--from {checkpoint!r}: no such checkpoint in {run_dir / 'checkpoints'}; allowed: "
                            f"{', '.join(have) or 'none (the run has no resume checkpoint yet)'}")
    ckpt = load_checkpoint(path, mmap=True, shards=False)
    if ckpt.get("weights_only") or "counters" not in ckpt:
        raise CheckpointError(f"--from {path.name}: it holds weights only (best.pt); give last.pt or a step-N.pt")
    return path, ckpt


def branch_cooldown(run_dir: Path, epochs: int, *, checkpoint: str | None = None, name: str | None = None,
                    quiet: bool = False) -> Any:
    """Copy ``checkpoint`` (default: the newest) of the ``wsd`` run ``run_dir`` into a new run folder and train it
    on with the decay starting at the checkpoint's update and ending at the end of epoch ``epochs``."""
    from trickbag.recipe import load_run_recipe
    from trickbag.runs.run import resume_run
    from trickbag.train.sharded import shards_of

    run_dir = Path(run_dir)
    if not (run_dir / "recipe.yaml").is_file():
        raise TrickbagError(f"{str(run_dir)!r} is not a run folder (no recipe.yaml)")
    recipe = load_run_recipe(run_dir, [])
    if recipe.schedule.name != "wsd":
        raise TrickbagError(f"a cooldown branches off a schedule.name=wsd run; {run_dir.name} uses "
                            f"schedule.name={recipe.schedule.name}")
    path, ckpt = _source(run_dir, checkpoint)
    c = ckpt["counters"]
    step, done = int(c["step"]), int(c["epoch"]) + (1 if c.get("batch_idx") else 0)
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < done:
        raise TrickbagError(f"--epochs must be at least {done} (the checkpoint {path.name} stands in epoch {done}), "
                            f"got {epochs!r}")
    dest = run_dir.parent / (name or f"{run_dir.name}-cooldown-{step}")
    if dest.exists():
        raise TrickbagError(f"{dest} exists already; give another --name")
    (dest / "checkpoints").mkdir(parents=True)
    shutil.copy2(run_dir / "recipe.yaml", dest / "recipe.yaml")
    shutil.copy2(path, dest / "checkpoints" / path.name)
    for folder in shards_of(path):
        if folder.name == ckpt.get("shards"):
            shutil.copytree(folder, dest / "checkpoints" / folder.name)
    return resume_run(dest, [f"train.epochs={epochs}", "schedule.decay_fraction=1.0"], quiet=quiet)
