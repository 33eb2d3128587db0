"""Where in the user's code an audited call came from: the innermost frame outside trickbag and torch."""

from __future__ import annotations

import functools
import os
import sys
import types

import torch

__all__ = ["user_where", "in_trickbag"]

_TRICKBAG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_RUNPY = os.path.abspath(getattr(sys.modules.get("runpy"), "__file__", "") or "runpy.py")


@functools.lru_cache(maxsize=4096)
def _internal(filename: str) -> bool:
    path = filename if filename.startswith("<") else os.path.abspath(filename)
    return path.startswith((_TRICKBAG_DIR, _TORCH_DIR, "<frozen")) or path == _RUNPY


@functools.lru_cache(maxsize=4096)
def in_trickbag(filename: str) -> bool:
    """True for a file of the trickbag package (the audit's own wrappers)."""
    return not filename.startswith("<") and os.path.abspath(filename).startswith(_TRICKBAG_DIR + os.sep)


def _shown(filename: str) -> str:
    if filename.startswith("<"):
        return filename
    path = os.path.abspath(filename)
    rel = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
    return rel


def user_where(skip: int = 1) -> str:
    """``file:line`` of the innermost frame outside trickbag and torch (the user's call)."""
    f: types.FrameType | None = sys._getframe(skip)
    while f is not None:
        name = f.f_code.co_filename
        if not _internal(name):
            return f"{_shown(name)}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"
