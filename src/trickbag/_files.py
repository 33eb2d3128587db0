"""Atomic file writes, without torch: the run files, the experiment outputs and the checkpoints
(through :mod:`trickbag.train.checkpoint`) all go through :func:`write_atomically`.

The data goes to a temporary file in the target's folder, is flushed and fsynced, then renamed over
the target, and the folder is fsynced: a crash or a full disk never leaves a half-written file
under the real name.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from trickbag.errors import TrickbagError

__all__ = ["write_atomically", "atomic_write_bytes", "atomic_write_text", "atomic_save_figure", "WriteError"]


class WriteError(TrickbagError, OSError):
    """A run file (metrics, summary, recipe) could not be written; the previous version is intact."""


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
        raise WriteError(
            f"could not write {str(path)!r}: {exc.strerror or exc}; the previous version of the file is intact"
        ) from exc


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


