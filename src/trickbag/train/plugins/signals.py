"""Stop a training run cleanly on SIGINT / SIGTERM.

:class:`GracefulInterrupt` turns the first SIGINT (Ctrl-C) or SIGTERM (``kill``, a cluster
pre-empting the job) into ``state.stop(StopReason.INTERRUPTED, ...)`` at the end of the optimizer
update in progress; the trainer then leaves the epoch, :class:`~trickbag.train.plugins.checkpoints.Checkpointing`
writes ``checkpoints/last.pt`` at that exact position and ``trickbag train`` exits with status 130
and the command that resumes the run. A second signal exits at once (``KeyboardInterrupt`` for
SIGINT, ``SystemExit(143)`` for SIGTERM) without writing anything more; files being written are
still replaced atomically or not at all.

Handlers are installed only from the main thread (Python delivers signals there) and the previous
handlers are restored afterwards. DataLoader worker processes inherit the handler but ignore it, so
they keep serving batches until the main process has finished its update.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, TextIO

from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State, StopReason

__all__ = ["GracefulInterrupt", "hold_signals"]

_HANDLED = (signal.SIGINT, signal.SIGTERM)

#: the first signal received while :func:`hold_signals` held them (before training began), for GracefulInterrupt
_held: list[int] = []


def hold_signals() -> None:
    """Until a :class:`GracefulInterrupt` is installed, record SIGINT/SIGTERM instead of acting on them; the
    interrupt then takes the first one as its own, so the run stops after its first update and saves.

    For a worker of ``trickbag train dist.nproc=N``: its launcher passes a Ctrl-C on to the workers at once,
    perhaps while they still build; each must then stop as a trained one does (a clean exit, a checkpoint), not
    with a ``KeyboardInterrupt`` that torchrun reports as a failed job. Main thread only (else a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _HANDLED:
        signal.signal(sig, lambda signum, frame: _held.append(signum) if not _held else None)


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

    def __init__(self, out: TextIO | None = sys.stderr) -> None:
        self.out = out
        self.signum: int | None = None
        self.installed = False
        self._previous: dict[int, Any] = {}
        self._pid = os.getpid()

    # ------------------------------------------------------------------ handlers
    def __enter__(self) -> GracefulInterrupt:
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
        if _held and self.signum is None:  # received while the run was being built
            self._handle(_held.pop(), None)
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

    def _handle(self, signum: int, frame: FrameType | None) -> None:
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
            state.stop(StopReason.INTERRUPTED, f"{signal.Signals(self.signum).name} after update {state.step}")

    def on_step(self, state: State) -> None:
        self._check(state)

    def on_epoch_end(self, state: State) -> None:
        self._check(state)
