"""A run directory: its name, its lock (one owner at a time), its checkpoints and leftovers.

The lock is ``<run>/.lock`` held with ``flock`` for the life of the process: the operating system
releases it when the process ends, however it ends, so a stale lock never blocks a resume, and a
second ``train`` or ``--resume`` of a run that is still training is refused with the holder's PID.
"""

from __future__ import annotations

import datetime
import errno
import os
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from trickbag.errors import CheckpointError, TrickbagError

__all__ = [
    "RunLock",
    "new_run_dir",
    "refuse_taken",
    "default_run_name",
    "data_run_stem",
    "find_resume_checkpoint",
    "remove_stale_temporaries",
    "is_run_dir",
]

LOCK = ".lock"


class RunLock:
    """An exclusive lock on a run directory, held by this process until :meth:`release` or its end."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock (creating the directory); :class:`TrickbagError` naming the holder if it is taken."""
        import fcntl

        from trickbag._files import explain_os_error

        existed = self.run_dir.is_dir()
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if existed:  # a resume, or a name taken again: the folder is there but not writable
                raise TrickbagError(f"cannot write in the run directory {str(self.run_dir)!r}: {exc.strerror or exc}; "
                                    "copy it to a writable disk and resume the copy (trickbag train --resume COPY)"
                                    ) from None
            where = _existing_parent(self.run_dir)
            raise TrickbagError(f"cannot create the run directory {str(self.run_dir)!r}: "
                                f"{explain_os_error(exc, where)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "another process"
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise TrickbagError(f"run directory {str(self.run_dir)!r} is in use by process {holder}; wait for it "
                                    "to finish or stop it, or choose another run.name=...") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _existing_parent(path: Path) -> Path:
    for parent in path.parents:
        if parent.is_dir():
            return parent
    return path.parent


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


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a trickbag run directory (it holds the run's ``recipe.yaml``)."""
    return Path(path, "recipe.yaml").is_file()


def _position(ckpt: dict[str, Any], path: Path) -> tuple[int, int, int]:
    """(epoch, batch, update) a training checkpoint resumes at; CheckpointError if it has none."""
    c = ckpt.get("counters")
    try:
        if "model" not in ckpt or not isinstance(c, dict):
            raise KeyError("counters")
        return int(c["epoch"]), int(c.get("batch_idx") or 0), int(c["step"])
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"checkpoint {str(path)!r} is not a trickbag training checkpoint") from None


def find_resume_checkpoint(run_dir: Path, out: TextIO | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The readable checkpoint of ``run_dir`` furthest into training, or None when it has none yet.

    Candidates are ``step-N.pt`` and ``last.pt``; their recorded position (epoch, batch, update)
    decides, not file times (a copied run directory loses those), so a truncated or corrupted
    newest file makes the run fall back to the previous one; unreadable ones are reported.
    """
    from trickbag.train.checkpoint import load_checkpoint
    from trickbag.train.checkpointing import list_checkpoints

    out = out if out is not None else sys.stderr
    ckpt_dir = Path(run_dir) / "checkpoints"
    candidates = list_checkpoints(ckpt_dir)
    if not candidates:
        return None
    problems = []
    best: tuple[tuple[int, ...], Path] | None = None
    for order, path in enumerate(candidates):  # newest file first: it wins ties
        try:
            key = (*_position(load_checkpoint(path, mmap=True), path), -order)  # mapped: only counters are read
        except CheckpointError as exc:
            problems.append(str(exc))
            continue
        if best is None or key > best[0]:
            best = (key, path)
    if best is None:
        note = f"{len(problems)} unreadable files, the first: " if len(problems) > 1 else ""
        raise CheckpointError(f"no readable checkpoint in {str(ckpt_dir)!r} ({note}{problems[0]})")
    for problem in problems:
        print(f"trickbag: skipping {problem}", file=out, flush=True)
    if problems:
        print(f"trickbag: falling back to {best[1]}", file=out, flush=True)
    return best[1], load_checkpoint(best[1])


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete the temporary files a crash mid-write left in ``run_dir`` (``.<name>.<random>.tmp``).

    Call it only while holding the run's lock: a running process's temporary files are its own.
    """
    removed = []
    for folder in (Path(run_dir), Path(run_dir) / "checkpoints"):
        if folder.is_dir():
            for p in folder.glob(".*.tmp"):
                p.unlink(missing_ok=True)
                removed.append(p)
    return removed
