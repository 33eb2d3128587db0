"""A run folder: the files a run writes, and how a run takes it over and picks up in it.

The layout is one for the command line and a hand-built :class:`~trickbag.train.trainer.Trainer` with
``run_dir=``: ``metrics.csv``, ``checkpoints/`` (``last.pt`` and ``best.pt`` at epoch ends, ``step-N.pt``
every few updates), ``loss.png`` / ``lr.png`` plots, a progress bar, ``.lock``. :class:`RunFolder` makes
the plug-ins that write them; :class:`RunLock` holds the folder for one process; :func:`find_resume_checkpoint`
finds where a resume continues.

The lock is ``<run>/.lock`` held with ``flock`` for the life of the process: the operating system
releases it when the process ends, however it ends, so a stale lock never blocks a resume, and a
second ``train`` or ``--resume`` of a run that is still training is refused with the holder's PID.
"""

from __future__ import annotations

import dataclasses
import errno
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal, TextIO

from trickbag.errors import CheckpointError, TrickbagError
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State

__all__ = ["LOCK", "RunLock", "RunFolder", "find_resume_checkpoint", "open_run_folder", "remove_stale_temporaries"]

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
    from trickbag.train.checkpoint_files import load_checkpoint
    from trickbag.train.plugins.checkpoints import list_checkpoints

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
    return best[1], load_checkpoint(best[1], shards=False)  # a sharded model reads its own part of the shards


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
    return removed + _remove_orphan_shards(Path(run_dir) / "checkpoints")


def _remove_orphan_shards(ckpt_dir: Path) -> list[Path]:
    """Shard folders (FSDP) that no checkpoint file names: a sharded save killed before its ``.pt`` was written."""
    import shutil

    from trickbag.train.checkpoint_files import load_checkpoint

    removed: list[Path] = []
    if not ckpt_dir.is_dir():
        return removed
    for folder in sorted(p for p in ckpt_dir.glob("*.shards-*") if p.is_dir()):
        owner = ckpt_dir / folder.name.split(".shards-")[0]
        try:
            named = load_checkpoint(owner, mmap=True, shards=False).get("shards") if owner.is_file() else None
        except CheckpointError:
            named = None  # an unreadable owner: its folder cannot be used either
        if named != folder.name:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@dataclasses.dataclass(kw_only=True)
class RunFolder:
    """What a run writes in ``path``, as plug-ins (:meth:`plugins`).

    Args:
        path: the run folder.
        progress: ``True`` a progress bar on a terminal (plain lines per epoch in a log file), ``"lines"`` plain
            lines only, ``False`` nothing on the screen.
        log_every_steps: updates between rows of ``metrics.csv``.
        checkpoint_every_steps: updates between ``step-N.pt`` checkpoints (a killed run loses at most that
            many); 0 or None: only ``last.pt`` at epoch ends.
        keep_checkpoints: how many ``step-N.pt`` to keep.
        plots: ``loss.png`` / ``lr.png`` at the end; ``None``: when matplotlib is installed.
        tensorboard: TensorBoard event files in ``tb/``.
        extra: entries stored in every checkpoint (the command line stores the recipe and the classes).
    """

    path: Path
    progress: bool | str = True
    log_every_steps: int = 10
    checkpoint_every_steps: int | None = None
    keep_checkpoints: int = 3
    plots: bool | None = None
    tensorboard: bool = False
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if self.progress not in (True, False, "lines"):
            raise ValueError(f"progress must be True, False or 'lines', got {self.progress!r}")

    def plugins(self, *, monitor: str, mode: Literal["max", "min"]) -> list[Plugin]:
        """The file-writing plug-ins, checkpointing last (it records what the others did)."""
        from trickbag.train.plugins.checkpoints import Checkpointing
        from trickbag.train.plugins.loggers import CSVLogger, TensorBoardLogger
        from trickbag.train.plugins.plots import Plots
        from trickbag.train.plugins.progress import ProgressBar

        d = self.path
        out: list[Plugin] = [CSVLogger(d / "metrics.csv", every_steps=self.log_every_steps)]
        if self.tensorboard:
            out.append(TensorBoardLogger(d / "tb", every_steps=self.log_every_steps))
        plots = self.plots if self.plots is not None else importlib.util.find_spec("matplotlib") is not None
        if plots:
            out.append(Plots(d, title=d.name, monitor=monitor, mode=mode))
        if self.progress:
            out.append(ProgressBar(every_steps=max(1, min(10, self.log_every_steps)), monitor=monitor, mode=mode,
                                   bar=None if self.progress is True else False))
        out.append(Checkpointing(d / "checkpoints", monitor=monitor, mode=mode, every_steps=self.checkpoint_every_steps,
                                 keep=self.keep_checkpoints, extra=dict(self.extra)))
        return out


def open_run_folder(run_dir: str | Path | RunFolder | None, progress: bool | str | None, *, is_main: bool,
                    monitor: str, mode: Literal["max", "min"]) -> tuple[FolderSession | None, list[Plugin], bool]:
    """A hand-built Trainer's ``run_dir=`` and ``progress=``: its folder session (None without a folder), the
    plug-ins that go after the caller's (the session and the folder's files, or a progress bar alone), and
    whether progress is shown (on the main process only). ``progress`` None: shown with a folder or a terminal."""
    if progress is None:
        progress = bool(run_dir is not None or sys.stderr.isatty())
    show = bool(progress) and is_main
    if run_dir is None:
        if not show:
            return None, [], show
        from trickbag.train.plugins.progress import ProgressBar

        return None, [ProgressBar(monitor=monitor, mode=mode, bar=None if progress is True else False)], show
    folder = run_dir if isinstance(run_dir, RunFolder) else RunFolder(path=Path(run_dir), progress=progress)
    if not show:
        folder = dataclasses.replace(folder, progress=False)
    session = FolderSession(folder.path, monitor=monitor, mode=mode)
    return session, [session, *folder.plugins(monitor=monitor, mode=mode)], show


class FolderSession(Plugin):
    """A hand-built Trainer's hold on its run folder: the lock from the start of :meth:`Trainer.fit` to its end,
    a crash's temporary files removed, and ``summary.txt`` at the end (the run's wall time across resumes is
    kept in its checkpoints)."""

    name = "run_folder"

    def __init__(self, path: Path, *, monitor: str, mode: str) -> None:
        self.path, self.monitor, self.mode = Path(path), monitor, mode
        self.lock: RunLock | None = None
        self.before = 0.0
        self.t0 = time.perf_counter()

    def acquire(self) -> None:
        if self.lock is None:
            self.lock = RunLock(self.path).acquire()
            remove_stale_temporaries(self.path)
            self.t0 = time.perf_counter()

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def wall_time(self) -> float:
        return self.before + time.perf_counter() - self.t0

    def on_fit_end(self, state: State) -> None:
        from trickbag._files import atomic_write_text

        if state.dist.is_main:
            atomic_write_text(self.path / "summary.txt", self.summary(state) + "\n")

    def summary(self, state: State) -> str:
        """Best and final monitored value, epochs and updates, why it stopped, wall time."""
        lines = []
        scored = [(h[self.monitor], int(h.get("epoch", i)) + 1) for i, h in enumerate(state.history)
                  if isinstance(h.get(self.monitor), (int, float))]
        if scored:
            best = (max if self.mode == "max" else min)(scored, key=lambda t: t[0])
            lines.append(f"best {self.monitor} {best[0]:.4f} (epoch {best[1]})")
            lines.append(f"final {self.monitor} {scored[-1][0]:.4f}")
        stop = state.stop_reason.value if state.stop_reason is not None else "finished"
        lines.append(f"trained {state.epoch} of {state.max_epochs} epochs, {state.step} updates; stop: {stop}")
        lines.append(f"wall time {self.wall_time():.1f} s")
        return "\n".join(lines)

    def state_dict(self) -> dict[str, Any]:
        return {"wall_time_s": self.wall_time()}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        self.before = float(sd.get("wall_time_s", 0.0))
        self.t0 = time.perf_counter()
