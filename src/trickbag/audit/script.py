"""``trickbag audit SCRIPT``: run a user's training script under the runtime audit, attached to the
optimizers the script builds (on their first step) and stopped cleanly after N optimizer steps."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, TextIO

from trickbag.audit.watch import Audit, AuditReport, StopScript

__all__ = ["run_script", "ScriptResult"]


@dataclass
class ScriptResult:
    """The audit report of a script run and how the script ended: ``'stopped'`` (after the requested
    number of steps), ``'finished'``, ``'exited'`` (``sys.exit``) or ``'failed'`` (an exception)."""

    report: AuditReport
    outcome: str
    exit_code: int = 0


def run_script(script: str | os.PathLike, args: Sequence[str] = (), *, steps: Optional[int] = 50,
               report: bool = True, file: Optional[TextIO] = None) -> ScriptResult:
    """Run ``script`` (with ``sys.argv = [script, *args]``) under an :class:`Audit` that adopts every
    optimizer the script creates; stop it before optimizer step ``steps + 1`` (``None``: run to the end).

    A missing script is a FileNotFoundError.  The report table goes to ``file`` (stderr).
    """
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"no such script: {str(script)!r}")
    watcher = Audit(report=False, stop_after=steps, adopt=True)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(path.resolve().parent))
    outcome, code = "finished", 0
    try:
        with watcher:
            try:
                runpy.run_path(str(path), run_name="__main__")
            except StopScript:
                outcome = "stopped"
            except SystemExit as exc:
                outcome, code = "exited", exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:
                outcome, code = "failed", 1
                traceback.print_exc()
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if report:
        tail = {"stopped": f" (stopped after {steps} optimizer steps)", "failed": " (the script raised an error)",
                "exited": f" (the script exited with status {code})", "finished": ""}[outcome]
        print(watcher.report.table() + ("\n" + tail.strip() if tail else ""), file=file or sys.stderr)
    return ScriptResult(watcher.report, outcome, code)
