"""Atomic checkpoint files, loaded safely.

A checkpoint is a plain dict of tensors and Python primitives, written to a temporary file in the
same directory, flushed, fsynced and renamed over the target, so a crash mid-write never leaves a
half-written file under the real name. Loading uses ``torch.load(weights_only=True)``: a file whose
pickle would run code is refused, never executed.
"""

from __future__ import annotations

import errno
import os
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from trickbag._files import (
    WriteError,
    atomic_save_figure,
    atomic_write_bytes,
    atomic_write_text,
    explain_os_error,
    os_error_in,
    write_atomically,
)
from trickbag.errors import CheckpointError

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_save_figure",
    "save_checkpoint",
    "load_checkpoint",
    "WriteError",
    "check_state_fits",
    "tensor_bytes",
]

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
        write_atomically(path, lambda fh: torch.save(checkpoint, fh), "wb")
    except (OSError, RuntimeError) as exc:
        # torch's zip writer turns a failed write into RuntimeError("... unexpected pos ..."); the OSError
        # it met (a full disk, a lost mount) is its __context__
        cause = os_error_in(exc)
        if cause is None and not _looks_like_a_write_failure(exc):
            raise
        reason = explain_os_error(cause, path.parent, tensor_bytes(checkpoint)) if cause else _disk_hint(path, exc)
        raise CheckpointError(
            f"could not write checkpoint {str(path)!r}: {reason}; the previous checkpoint is intact"
        ) from exc
    return path


def tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors in a (nested) checkpoint dict: about what the file needs."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def _looks_like_a_write_failure(exc: BaseException) -> bool:
    msg = str(exc)
    return "inline_container" in msg or "PytorchStreamWriter" in msg or "file write failed" in msg


def _disk_hint(path: Path, exc: BaseException) -> str:
    """A zip-writer failure without the OSError behind it: say whether the disk is full."""
    try:
        st = os.statvfs(path.parent)
        free = st.f_bavail * st.f_frsize
    except OSError:
        return f"the file could not be written ({str(exc).splitlines()[0][:200]})"
    if free < 2**20:
        return explain_os_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), path.parent)
    return f"the file could not be written ({str(exc).splitlines()[0][:200]})"


def _explain_load_error(path: Path, exc: Exception) -> str:
    """One line saying why ``torch.load(weights_only=True)`` failed on ``path``."""
    msg = str(exc)
    unsafe = re.search(r"(?i)unsupported global:? (?:global )?([\w.]+)", msg)
    if unsafe:
        return (
            f"checkpoint {str(path)!r} was refused: it would import and call {unsafe.group(1)!r} when loaded, "
            "which is not a tensor or plain data (nothing from it was run)"
        )
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as err:
        return f"checkpoint {str(path)!r} cannot be read: {err.strerror or err}"
    if not head:
        return f"checkpoint {str(path)!r} is empty (a crash while it was copied or written?)"
    if head == b"PK\x03\x04":  # torch.save's zip format
        return f"checkpoint {str(path)!r} is truncated or corrupted (its zip archive cannot be read)"
    if head[:1] == b"\x80":  # a pickle: torch's legacy format, or pickle.dump
        return (f"checkpoint {str(path)!r} is a Python pickle that torch cannot load as plain tensors and data "
                "(weights_only=True); nothing from it was run")
    return f"{str(path)!r} is not a checkpoint written by torch.save"


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu", *, mmap: bool = False,
                    shards: bool | None = None) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``; one clear :class:`CheckpointError` for every failure.

    ``mmap=True`` maps the tensors instead of reading them (cheap when only the counters are needed).
    A file whose pickle names anything but tensors and plain data is refused before any of it runs.
    A sharded checkpoint (FSDP2, :mod:`trickbag.train.sharded`) gets its shards read in as whole tensors
    (``shards=True``, the default without ``mmap``), or keeps its placeholders (``shards=False``) with
    ``"shards_dir"`` naming the folder, for a sharded model to read its own part (``Trainer.load_state_dict``).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.pt"
    >>> _ = p.write_bytes(b"not a checkpoint")
    >>> load_checkpoint(p)
    Traceback (most recent call last):
    ...
    trickbag.errors.CheckpointError: '...c.pt' is not a checkpoint written by torch.save
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    if path.is_dir():
        raise CheckpointError(f"checkpoint {str(path)!r} is a directory, not a file")
    try:
        with warnings.catch_warnings():  # torch warns about odd pickle protocols before refusing them
            warnings.simplefilter("ignore", UserWarning)
            obj = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except Exception as exc:  # torch raises many types for corrupt or unsafe files
        raise CheckpointError(_explain_load_error(path, exc)) from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"checkpoint {str(path)!r} holds a {type(obj).__name__}, not a checkpoint dict")
    if isinstance(obj.get("shards"), str):
        return _with_shards(path, obj, read=not mmap if shards is None else shards)
    return obj


def _with_shards(path: Path, obj: dict[str, Any], *, read: bool) -> dict[str, Any]:
    """A sharded checkpoint with its shard folder checked, and its shards read in as whole tensors if ``read``."""
    from trickbag.train.sharded import fill_shards

    folder = path.parent / obj["shards"]
    if "/" in obj["shards"] or not (folder / ".metadata").is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} is sharded, and its shards folder {str(folder)!r} is missing "
                              "or incomplete (a copy without it?)")
    if not read:
        return {**obj, "shards_dir": str(folder)}
    whole = {k: v for k, v in obj.items() if k != "shards"}  # read in: the checkpoint of a plain model
    try:
        return fill_shards(whole, folder)
    except Exception as exc:  # DCP raises many types for missing or corrupt shard files
        raise CheckpointError(f"checkpoint {str(path)!r}: its shards in {str(folder)!r} cannot be read: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}") from None


def _preview(items: list[str], limit: int = 4) -> str:
    return ", ".join(items[:limit]) + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def check_state_fits(model: torch.nn.Module, state: Any, source: str) -> None:
    """Raise one :class:`CheckpointError` naming missing / unexpected keys and shape mismatches.

    ``source`` names where ``state`` (a model ``state_dict``) came from, for the message.

    >>> check_state_fits(torch.nn.Linear(2, 3), torch.nn.Linear(2, 4).state_dict(), "checkpoint 'a.pt'")
    Traceback (most recent call last):
    ...
    trickbag.errors.CheckpointError: checkpoint 'a.pt' does not fit the model (Linear): shapes differ: weight checkpoint
    [4, 2] vs model [3, 2], bias checkpoint [4] vs model [3]
    """
    name = type(model).__name__
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise CheckpointError(f"{source} holds no model weights (a dict of parameter names to tensors)")
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [
        f"{k} checkpoint {list(state[k].shape)} vs model {list(v.shape)}"
        for k, v in own.items()
        if isinstance(state.get(k), torch.Tensor) and state[k].shape != v.shape
    ]
    parts = []
    if shapes:
        parts.append(f"shapes differ: {_preview(shapes)}")
    if missing:
        parts.append(f"missing in the checkpoint: {_preview(missing)}")
    if unexpected:
        parts.append(f"not in the model: {_preview(unexpected)}")
    if parts:
        raise CheckpointError(f"{source} does not fit the model ({name}): " + "; ".join(parts))
