"""Crash test plug-in: SIGKILL or signal a real ``python -m trickbag`` run at a chosen point.

Added to a run with ``train.plugins=[reliability.killswitch:KillSwitch]`` (``tests`` on PYTHONPATH);
the points come from ``$TRICKBAG_TEST_KILL_AT`` (unset: the plug-in does nothing), comma-separated:

* ``step:N``   SIGKILL right after optimizer update ``N`` and its checkpoints;
* ``eval:E``   SIGKILL during the evaluation of epoch ``E`` (1-based; EMA weights swapped in);
* ``write:NAME`` SIGKILL while the file ``NAME`` (e.g. ``step-00000020.pt``) is being written: the
  temporary file is cut to half its size first, as a crash mid-write leaves it;
* ``sigint:N`` / ``sigterm:N``  send that signal to the process after update ``N`` (repeat the
  action to send it twice).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from trickbag.plugin.interface import Plugin

ENV = "TRICKBAG_TEST_KILL_AT"
PLUGIN = "train.plugins=[reliability.killswitch:KillSwitch]"


def parse(spec: str) -> list[tuple[str, str]]:
    actions = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        kind, _, arg = item.partition(":")
        if not arg or (kind != "write" and (kind not in ("step", "eval", "sigint", "sigterm") or not arg.isdigit())):
            raise ValueError(f"{ENV}={spec!r}: {item!r} is not one of step:N, eval:E, write:NAME, sigint:N, sigterm:N")
        actions.append((kind, arg))
    return actions


def _sigkill() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class _OsKillingWrites:
    """``os`` for trickbag._files: kills the process while a named file is written (before its rename)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def replace(self, src: Any, dst: Any) -> None:
        tmp = Path(src)
        if any(tmp.name.startswith(f".{name}.") for name in self.names):  # temporaries: .<name>.<random>.tmp
            os.truncate(tmp, tmp.stat().st_size // 2)
            _sigkill()
        os.replace(src, dst)


class KillSwitch(Plugin):
    """The actions of ``$TRICKBAG_TEST_KILL_AT`` (see the module docstring)."""

    def __init__(self, spec: str | None = None) -> None:
        self.actions = parse(os.environ.get(ENV, "") if spec is None else spec)
        self._done: set[int] = set()

    def on_fit_start(self, state: Any) -> None:
        writes = [arg for kind, arg in self.actions if kind == "write"]
        if writes:
            from trickbag import _files

            _files.os = _OsKillingWrites(writes)

    def on_fit_end(self, state: Any) -> None:
        from trickbag import _files

        _files.os = os

    def _fire(self, kinds: tuple[str, ...], value: int) -> None:
        for i, (kind, arg) in enumerate(self.actions):
            if i in self._done or kind not in kinds or int(arg) != value:
                continue
            self._done.add(i)
            if kind in ("step", "eval"):
                _sigkill()
            else:
                os.kill(os.getpid(), signal.SIGINT if kind == "sigint" else signal.SIGTERM)

    def on_step(self, state: Any) -> None:
        if not state.step_skipped:
            self._fire(("sigint", "sigterm"), state.step)

    def on_checkpoint(self, state: Any) -> None:  # after the update's checkpoints were written
        if not state.epoch_done and not state.step_skipped:
            self._fire(("step",), state.step)

    def on_eval_start(self, state: Any) -> None:
        self._fire(("eval",), state.epoch + 1)
