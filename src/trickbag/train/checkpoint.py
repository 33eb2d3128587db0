"""Atomic checkpoint files, loaded safely.

A checkpoint is a plain dict of tensors and Python primitives, written to a temporary file in the
same directory, flushed, fsynced and renamed over the target, so a crash mid-write never leaves a
half-written file under the real name. Loading uses ``torch.load(weights_only=True)``: a file whose
pickle would run code is refused, never executed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from trickbag.errors import CheckpointError

__all__ = ["atomic_write_bytes", "atomic_write_text", "save_checkpoint", "load_checkpoint", "FAULT_HOOK"]

#: test seam: called with the temporary path after the data is written and before the rename
FAULT_HOOK: Optional[Callable[[Path], None]] = None


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


def _atomic_write(path: Path, write: Callable[[Any], None], mode: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, mode) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if FAULT_HOOK is not None:
            FAULT_HOOK(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename)."""
    _atomic_write(path, lambda fh: fh.write(data), "wb")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    _atomic_write(path, lambda fh: fh.write(text.encode("utf-8")), "wb")


def save_checkpoint(path: str | os.PathLike, checkpoint: dict[str, Any]) -> Path:
    """Save a checkpoint dict atomically; raises :class:`CheckpointError` (file untouched) on I/O errors.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.pt"
    >>> _ = save_checkpoint(p, {"step": 3, "w": torch.ones(2)})
    >>> load_checkpoint(p)["step"]
    3
    """
    path = Path(path)
    try:
        _atomic_write(path, lambda fh: torch.save(checkpoint, fh), "wb")
    except OSError as exc:
        raise CheckpointError(
            f"could not write checkpoint {str(path)!r}: {exc.strerror or exc}; "
            "the previous checkpoint is intact"
        ) from exc
    return path


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``; one clear :class:`CheckpointError` for every failure."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    if path.is_dir():
        raise CheckpointError(f"checkpoint {str(path)!r} is a directory, not a file")
    try:
        obj = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises many types for corrupt or unsafe files
        text = str(exc).strip().splitlines()
        first = text[0] if text else type(exc).__name__
        if "weights_only" in str(exc) or "Unsupported global" in str(exc) or "WeightsUnpickler" in str(exc):
            raise CheckpointError(
                f"checkpoint {str(path)!r} was refused: it contains Python objects other than tensors "
                "and plain data, which could run code when loaded"
            ) from None
        raise CheckpointError(f"checkpoint {str(path)!r} is not a readable checkpoint ({first[:120]})") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"checkpoint {str(path)!r} holds a {type(obj).__name__}, not a checkpoint dict")
    return obj
