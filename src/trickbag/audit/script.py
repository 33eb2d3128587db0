"""``trickbag audit SCRIPT``: run a user's training script under the runtime audit, attached to the
optimizers the script builds (on their first step) and stopped cleanly after N optimizer steps."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TextIO

from trickbag.audit._where import in_trickbag
from trickbag.audit.watch import Audit, AuditReport, StopScript

__all__ = ["run_script", "ScriptResult", "EXIT_SCRIPT_RAISED"]

#: exit status of ``trickbag audit`` when the script raised an exception (see :func:`ScriptResult.exit_status`):
#: EX_SOFTWARE of sysexits.h, far from the small statuses scripts pass to ``sys.exit`` and from 1 (findings)
EXIT_SCRIPT_RAISED = 70


@dataclass
class ScriptResult:
    """The audit report of a script run and how the script ended: ``'stopped'`` (after the requested
    number of steps), ``'finished'``, ``'exited'`` (``sys.exit``; ``exit_code`` is its status) or
    ``'failed'`` (an exception; its traceback was printed as Python prints it)."""

    report: AuditReport
    outcome: str
    exit_code: int = 0

    def exit_status(self) -> int:
        """``trickbag audit``'s exit status: 70 when the script raised, else 1 with findings, else the
        script's own ``sys.exit`` status (0 when it finished or was stopped after N steps)."""
        if self.outcome == "failed":
            return EXIT_SCRIPT_RAISED
        if self.report.findings:
            return 1
        return self.exit_code if self.outcome == "exited" else 0


def _exit_code(exc: SystemExit, file: TextIO) -> int:
    """The status ``sys.exit(code)`` gives, printing a non-integer code as Python does."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=file)
    return 1


def _internal_frame(tb: TracebackType) -> bool:
    name = tb.tb_frame.f_code.co_filename
    return in_trickbag(name) or name.startswith("<frozen runpy") or tb.tb_frame.f_globals.get("__name__") == "runpy"


def _user_traceback(tb: TracebackType | None) -> TracebackType | None:
    """The traceback without runpy's and trickbag's frames (the audit's wrappers between the script and
    torch included): what ``python SCRIPT`` would show.  Relinks the chain in place."""
    kept = []
    while tb is not None:
        if not _internal_frame(tb):
            kept.append(tb)
        tb = tb.tb_next
    for a, b in zip(kept, kept[1:] + [None]):
        a.tb_next = b
    return kept[0] if kept else None


def run_script(script: str | os.PathLike, args: Sequence[str] = (), *, steps: int | None = 50,
               report: bool = True, file: TextIO | None = None) -> ScriptResult:
    """Run ``script`` (with ``sys.argv = [script, *args]``) under an :class:`Audit` that adopts every
    optimizer the script creates; stop it before optimizer step ``steps + 1`` (``None``: run to the end).

    A missing script is a FileNotFoundError.  An exception raised by the script is printed as Python
    prints it (the script's frames only) to ``file`` (stderr), as is the report table.
    """
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"no such script: {str(script)!r}")
    err = file or sys.stderr
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
                outcome, code = "exited", _exit_code(exc, err)
            except Exception as exc:
                outcome, code = "failed", EXIT_SCRIPT_RAISED
                traceback.print_exception(type(exc), exc, _user_traceback(exc.__traceback__), file=err)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    if report:
        tail = {"stopped": f" (stopped after {steps} optimizer steps)", "failed": " (the script raised an error)",
                "exited": f" (the script exited with status {code})", "finished": ""}[outcome]
        print(watcher.report.table() + ("\n" + tail.strip() if tail else ""), file=err)
    return ScriptResult(watcher.report, outcome, code)
