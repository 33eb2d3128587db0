"""Import optional dependencies with an error message naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from trickbag.errors import MissingExtraError


def require(module: str, *, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``pip install trickbag[extra]``.

    >>> require("math", extra="none").sqrt(4.0)
    2.0
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(
            f"{module!r} is not installed; it is needed for this feature. "
            f"Install it with: pip install 'trickbag[{extra}]'"
        ) from exc
