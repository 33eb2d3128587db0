"""The loop doctor: static lint rules for training loops (``lint``, stdlib only) and the runtime ``audit`` (torch)."""

from __future__ import annotations

from trickbag._optional import lazy_exports

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


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
