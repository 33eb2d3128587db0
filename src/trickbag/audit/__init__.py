"""The loop doctor: static lint rules for training loops (``lint``, stdlib only) and the runtime ``audit`` (torch)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["lint_source", "lint_file", "lint_paths", "Finding", "RULES", "Rule", "audit", "Audit", "AuditReport",
           "AuditFinding", "run_script"]

_EXPORTS = {
    "lint_source": "trickbag.audit.lint",
    "lint_file": "trickbag.audit.lint",
    "lint_paths": "trickbag.audit.lint",
    "Finding": "trickbag.audit.lint",
    "RULES": "trickbag.audit.lint",
    "Rule": "trickbag.audit.registry",
    "audit": "trickbag.audit.watch",
    "Audit": "trickbag.audit.watch",
    "AuditReport": "trickbag.audit.watch",
    "AuditFinding": "trickbag.audit.watch",
    "run_script": "trickbag.audit.script",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trickbag.audit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
