"""Atomic file writes, without torch: the run files, the experiment outputs and the checkpoints
(through :mod:`trickbag.train.checkpoint_files`) all go through :func:`write_atomically`.

The data goes to a temporary file in the target's folder, is flushed and fsynced, then renamed over
the target, and the folder is fsynced: a crash or a full disk never leaves a half-written file
under the real name.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trickbag.errors import TrickbagError

__all__ = ["write_atomically", "atomic_write_bytes", "atomic_write_text", "atomic_save_figure", "WriteError",
           "explain_os_error", "os_error_in"]


class WriteError(TrickbagError, OSError):
    """A run file (metrics, summary, recipe) could not be written; the previous version is intact."""


def _megabytes(n: float) -> str:
    return f"{n / 2**20:,.1f} MB"


def explain_os_error(exc: OSError, folder: Path, needed: int | None = None) -> str:
    """``exc``'s reason and what to do about it, for a file that could not be written in ``folder``.

    A full disk says how much is free there (and needed, when known); a read-only file system, a
    missing permission or the process's file size limit say so; anything else is its ``strerror``.
    """
    reason = exc.strerror or str(exc)
    folder = Path(folder)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            st = os.statvfs(folder)
            room = f"{_megabytes(st.f_bavail * st.f_frsize)} free in {folder}"
        except OSError:
            room = f"in {folder}"
        need = f", about {_megabytes(needed)} needed" if needed else ""
        return (f"{reason} ({room}{need}): free space there (old runs; fewer step checkpoints with "
                "train.keep_checkpoints) or set run.dir on another disk")
    if exc.errno == errno.EROFS:
        return f"{reason}: {folder} cannot be written; set run.dir to a folder on a writable disk"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{reason}: this user may not write in {folder}; set run.dir to a folder you own"
    if exc.errno == errno.EFBIG:
        return f"{reason}: the file is larger than this process may write (ulimit -f)"
    return reason


def os_error_in(exc: BaseException) -> OSError | None:
    """The :class:`OSError` behind ``exc``: itself, or the one torch's zip writer met (its ``__context__``)."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, OSError):
            return exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return None


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomically(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, fsync, rename it over ``path``, fsync the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, mode) as fh:
            # mkstemp creates 0600; give the file the mode a plain open() would (0666 minus the umask)
            os.fchmod(fh.fileno(), 0o666 & ~_UMASK)
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _write_or_explain(path: Path, write: Callable[[Any], None]) -> None:
    try:
        write_atomically(path, write, "wb")
    except WriteError:
        raise
    except OSError as exc:
        kept = "the previous version of the file is intact" if path.exists() else "nothing was written"
        raise WriteError(f"could not write {str(path)!r}: {explain_os_error(exc, path.parent)}; {kept}") from exc


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename); :class:`WriteError` on I/O errors."""
    _write_or_explain(Path(path), lambda fh: fh.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; :class:`WriteError` on I/O errors.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> atomic_write_text(p, "one"); atomic_write_text(p, "two"); p.read_text()
    'two'
    """
    _write_or_explain(Path(path), lambda fh: fh.write(text.encode("utf-8")))


def atomic_save_figure(fig: Any, path: str | os.PathLike, dpi: int = 100) -> Path:
    """Lay out a matplotlib figure tightly, write it to ``path`` as PNG atomically and close it.

    :class:`WriteError` on I/O errors (the figure is closed either way); returns ``Path(path)``.
    """
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        fig.tight_layout()
        _write_or_explain(path, lambda fh: fig.savefig(fh, format="png", dpi=dpi))
    finally:
        plt.close(fig)
    return path


