"""A run directory: its name, its lock (one owner at a time), its checkpoints and leftovers.

The lock is ``<run>/.lock`` held with ``flock`` for the life of the process: the operating system
releases it when the process ends, however it ends, so a stale lock never blocks a resume, and a
second ``train`` or ``--resume`` of a run that is still training is refused with the holder's PID.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

from trickbag.errors import TrickbagError
from trickbag.train.plugins.run_folder import LOCK, RunLock, find_resume_checkpoint, remove_stale_temporaries

__all__ = [
    "LOCK",
    "check_folder_layout",
    "RunLock",
    "new_run_dir",
    "refuse_taken",
    "default_run_name",
    "data_run_stem",
    "find_resume_checkpoint",
    "remove_stale_temporaries",
    "is_run_dir",
]

def data_run_stem(recipe: Any) -> str:
    """A run-name stem for the recipe's data: the file or folder name of ``data.root`` (``wine.csv`` ->
    ``wine``, ``~/pets`` -> ``pets``), else ``data.name``; characters other than letters, digits, ``_.`` -> ``_``.

    >>> from types import SimpleNamespace as NS
    >>> csv, own = NS(data=NS(name="csv", root="/data/my wine.csv")), NS(data=NS(name="a.b:c", root=None))
    >>> data_run_stem(csv), data_run_stem(own)
    ('my_wine', 'a.b_c')
    """
    root = getattr(recipe.data, "root", None)
    stem = (Path(str(root)).expanduser().stem or Path(str(root)).name) if root else str(recipe.data.name)
    return re.sub(r"[^\w.]+", "_", stem).strip("_.") or "run"


def default_run_name(recipe: Any, *, after_data: bool = False) -> str:
    """``<recipe name>-<date>-<time>``; ``after_data``: ``<data stem>-...`` (:func:`data_run_stem`), for a run
    of the default recipe on other data, which the recipe's name would misdescribe."""
    stem = data_run_stem(recipe) if after_data else recipe.name
    return f"{stem}-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def _contents(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.iterdir() if p.name != LOCK]


def new_run_dir(recipe: Any) -> Path:
    """The directory a new run of ``recipe`` will write (not created yet); refused when it holds a run."""
    name = recipe.run.name or default_run_name(recipe)
    root = Path(recipe.run.dir).expanduser()
    if root.exists() and not root.is_dir():
        raise TrickbagError(f"run.dir={recipe.run.dir!r} is a file, not a folder; give a folder for the runs")
    run_dir = root / name
    refuse_taken(run_dir)
    return run_dir


def refuse_taken(run_dir: Path) -> None:
    """:class:`TrickbagError` when ``run_dir`` is a file or holds a run (anything but its lock file)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise TrickbagError(f"run directory {str(run_dir)!r} is a file; choose another run.name=...")
    if run_dir.is_dir() and _contents(run_dir):
        raise TrickbagError(
            f"run directory {str(run_dir)!r} already exists; choose another run.name=..., "
            f"or continue it with: trickbag train --resume {run_dir}"
        )


#: what a run keeps in its folder, and whether each is a folder: a path of the other kind stops the run before it starts
_LAYOUT = {"checkpoints": True, "tb": True, "metrics.csv": False, "summary.txt": False, "resumes.log": False}


def check_folder_layout(run_dir: Path) -> None:
    """:class:`TrickbagError` (one line) when a path the run writes is of the wrong kind (``checkpoints`` a file,
    ``metrics.csv`` a folder, ...), found before a resume locks, builds or writes anything."""
    for name, folder in _LAYOUT.items():
        path = Path(run_dir) / name
        if path.exists() and path.is_dir() != folder:
            kind, want = ("a folder", "a file") if path.is_dir() else ("a file", "a folder")
            raise TrickbagError(f"{str(path)!r} is {kind}, not {want}: the run writes its {name} there; move it "
                                f"out of the run directory and resume again (trickbag train --resume {run_dir})")


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a trickbag run directory (it holds the run's ``recipe.yaml``)."""
    return Path(path, "recipe.yaml").is_file()
