"""Import optional dependencies with a one-line error naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from trickbag.errors import MissingExtraError

__all__ = ["require"]


def require(module: str, *, extra: str, feature: str = "this feature") -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``pip install 'trickbag[extra]'``.

    >>> require("math", extra="none").sqrt(4.0)
    2.0
    >>> require("no_such_module_here", extra="app", feature="the digits data set")
    Traceback (most recent call last):
    ...
    trickbag.errors.MissingExtraError: the digits data set needs 'no_such_module_here', which is not installed: pip install 'trickbag[app]'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingExtraError(
            f"{feature} needs {top!r}, which is not installed: pip install 'trickbag[{extra}]'"
        ) from exc
