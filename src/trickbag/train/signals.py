"""Stop a training run cleanly on SIGINT / SIGTERM, and the crash test seam of the resume tests.

:class:`GracefulInterrupt` turns the first SIGINT (Ctrl-C) or SIGTERM (``kill``, a cluster
pre-empting the job) into ``state.stop("interrupted by SIGINT ...")`` at the end of the optimizer
update in progress; the trainer then leaves the epoch, :class:`~trickbag.train.builtin.Checkpointing`
writes ``checkpoints/last.pt`` at that exact position and ``trickbag train`` exits with status 130
and the command that resumes the run. A second signal exits at once (``KeyboardInterrupt`` for
SIGINT, ``SystemExit(143)`` for SIGTERM) without writing anything more; files being written are
still replaced atomically or not at all.

Handlers are installed only from the main thread (Python delivers signals there) and the previous
handlers are restored afterwards. DataLoader worker processes inherit the handler but ignore it, so
they keep serving batches until the main process has finished its update.

**Test seam** (not a user feature): ``TRICKBAG_TEST_KILL_AT`` makes a run crash or signal itself
at a chosen point, so tests can check what a real crash leaves behind. Comma-separated actions:

* ``step:N``   SIGKILL right after optimizer update ``N`` (after its checkpoints were written);
* ``eval:E``   SIGKILL during the evaluation of epoch ``E`` (1-based; EMA weights swapped in);
* ``write:NAME`` SIGKILL while checkpoint ``NAME`` (e.g. ``step-00000020.pt``) is being written:
  the temporary file is cut to half its size first, as a crash mid-write leaves it;
* ``sigint:N`` / ``sigterm:N``  send that signal to the process after update ``N`` (repeat the
  action to send it twice).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Optional, TextIO

from trickbag.errors import TrickbagError
from trickbag.train.plugin import Plugin
from trickbag.train.state import State

__all__ = ["GracefulInterrupt", "KillSwitch", "kill_switch_from_env", "TEST_KILL_ENV"]

#: environment variable of the crash test seam (see the module docstring)
TEST_KILL_ENV = "TRICKBAG_TEST_KILL_AT"

_HANDLED = (signal.SIGINT, signal.SIGTERM)


class GracefulInterrupt(Plugin):
    """First SIGINT/SIGTERM: finish the current optimizer update, then stop; second: exit at once.

    Use it as a context manager around ``trainer.fit()`` with the plug-in added to the trainer; the
    signal handlers live only inside the ``with`` block and only in the main thread (elsewhere the
    block is a no-op and :attr:`installed` is False).

    The stop is requested at the STEP event (after the update, its EMA update and its step
    checkpoint) or, when the signal arrives during evaluation, at EPOCH_END of that epoch.

    >>> import signal
    >>> before = signal.getsignal(signal.SIGTERM)
    >>> with GracefulInterrupt(out=None) as gi:
    ...     signal.getsignal(signal.SIGTERM) == gi._handle
    True
    >>> signal.getsignal(signal.SIGTERM) is before
    True
    """

    def __init__(self, out: Optional[TextIO] = sys.stderr) -> None:
        self.out = out
        self.signum: Optional[int] = None
        self.installed = False
        self._previous: dict[int, Any] = {}
        self._pid = os.getpid()

    # ------------------------------------------------------------------ handlers
    def __enter__(self) -> "GracefulInterrupt":
        self.install()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.restore()

    def install(self) -> bool:
        """Install the handlers (main thread only); returns whether they were installed."""
        if self.installed or threading.current_thread() is not threading.main_thread():
            return self.installed
        self._pid = os.getpid()
        for sig in _HANDLED:
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._handle)
        self.installed = True
        return True

    def restore(self) -> None:
        """Put back the handlers that were there before :meth:`install`."""
        if not self.installed:
            return
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()
        self.installed = False

    def _say(self, text: str) -> None:
        if self.out is not None:
            print(text, file=self.out, flush=True)

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if os.getpid() != self._pid:  # a forked DataLoader worker: the main process decides
            return
        name = signal.Signals(signum).name
        if self.signum is None:
            self.signum = signum
            self._say(
                f"trickbag: {name} received: finishing the current update and saving a checkpoint "
                "(send it again to stop at once)"
            )
            return
        self._say(f"trickbag: second {name}: stopping now, without a new checkpoint")
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    # ------------------------------------------------------------------ plug-in
    @property
    def requested(self) -> bool:
        """Whether a stop signal has arrived."""
        return self.signum is not None

    def _check(self, state: State) -> None:
        # under DDP the trainer makes every rank stop after the same update (distributed.agree_stop)
        if self.signum is not None and not state.should_stop:
            state.stop(f"interrupted by {signal.Signals(self.signum).name} after update {state.step}")

    def on_step(self, state: State) -> None:
        self._check(state)

    def on_epoch_end(self, state: State) -> None:
        self._check(state)


# --------------------------------------------------------------------------- crash test seam
def _parse(spec: str) -> list[tuple[str, str]]:
    actions = []
    for item in spec.split(","):
        kind, sep, arg = item.strip().partition(":")
        ok = sep and arg and (kind == "write" or (kind in ("step", "eval", "sigint", "sigterm") and arg.isdigit()))
        if not ok:
            raise TrickbagError(
                f"{TEST_KILL_ENV}={spec!r}: {item!r} is not one of step:N, eval:E, write:NAME, sigint:N, sigterm:N"
            )
        actions.append((kind, arg))
    return actions


def _sigkill() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class KillSwitch(Plugin):
    """Test seam: crash (SIGKILL) or signal this process at chosen points of a run.

    Built from ``$TRICKBAG_TEST_KILL_AT`` by :func:`kill_switch_from_env`; add it after every other
    plug-in so that ``step:N`` fires after the checkpoints of update ``N`` were written. While
    installed (:meth:`install`), ``write:NAME`` actions wrap :data:`trickbag._files.FAULT_HOOK`.
    """

    def __init__(self, spec: str) -> None:
        self.actions = _parse(spec)
        self._done: set[int] = set()
        self._previous_hook: Optional[Callable[[Path], None]] = None
        self._hooked = False

    def _fire(self, kinds: tuple[str, ...], value: int) -> None:
        for i, (kind, arg) in enumerate(self.actions):
            if i in self._done or kind not in kinds or int(arg) != value:
                continue
            self._done.add(i)
            if kind in ("step", "eval"):
                _sigkill()
            else:
                os.kill(os.getpid(), signal.SIGINT if kind == "sigint" else signal.SIGTERM)

    def on_step(self, state: State) -> None:
        if not state.step_skipped:
            self._fire(("step", "sigint", "sigterm"), state.step)

    def on_eval_start(self, state: State) -> None:
        self._fire(("eval",), state.epoch + 1)

    def _write_hook(self, tmp: Path) -> None:
        if self._previous_hook is not None:
            self._previous_hook(tmp)
        for i, (kind, arg) in enumerate(self.actions):
            # temporary files are named .<target name>.<random>.tmp
            if kind == "write" and i not in self._done and tmp.name.startswith(f".{arg}."):
                self._done.add(i)
                os.truncate(tmp, tmp.stat().st_size // 2)
                _sigkill()

    def install(self) -> None:
        """Hook checkpoint writes for ``write:NAME`` actions."""
        from trickbag import _files

        if any(kind == "write" for kind, _ in self.actions) and not self._hooked:
            self._previous_hook = _files.FAULT_HOOK
            _files.FAULT_HOOK = self._write_hook
            self._hooked = True

    def restore(self) -> None:
        """Remove the write hook again."""
        from trickbag import _files

        if self._hooked:
            _files.FAULT_HOOK = self._previous_hook
            self._hooked = False


def kill_switch_from_env(environ: Optional[dict[str, str]] = None) -> Optional[KillSwitch]:
    """The :class:`KillSwitch` that ``$TRICKBAG_TEST_KILL_AT`` asks for, or None when it is unset.

    >>> kill_switch_from_env({}) is None
    True
    >>> kill_switch_from_env({"TRICKBAG_TEST_KILL_AT": "step:7,eval:2"}).actions
    [('step', '7'), ('eval', '2')]
    """
    spec = (os.environ if environ is None else environ).get(TEST_KILL_ENV, "").strip()
    return KillSwitch(spec) if spec else None
