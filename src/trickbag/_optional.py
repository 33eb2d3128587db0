"""Imports on demand: optional dependencies with a one-line error naming the extra to install
(:func:`require`), and a package's lazy re-exports (:func:`lazy_exports`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from trickbag.errors import MissingExtraError

__all__ = ["require", "lazy_exports"]


def require(module: str, *, extra: str, feature: str = "this feature") -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``pip install 'trickbag[extra]'``.

    >>> require("math", extra="none").sqrt(4.0)
    2.0
    >>> require("no_such_module_here", extra="app", feature="the digits data set")
    Traceback (most recent call last):
    ...
    trickbag.errors.MissingExtraError: the digits data set needs 'no_such_module_here', which is not installed: pip
    install 'trickbag[app]'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingExtraError(
            f"{feature} needs {top!r}, which is not installed: pip install 'trickbag[{extra}]'"
        ) from exc


def lazy_exports(namespace: dict[str, Any],
                 exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the module whose globals are ``namespace``: a name of ``exports``
    (name -> the module defining it) is imported when first asked for, then kept in ``namespace``.

    Use it as ``__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)``.

    >>> pkg = ModuleType("pkg")
    >>> pkg.__getattr__, pkg.__dir__ = lazy_exports(vars(pkg), {"dedent": "textwrap"})
    >>> pkg.dedent("  x").strip(), "dedent" in dir(pkg)
    ('x', True)
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
