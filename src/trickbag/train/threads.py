"""``train.threads``: torch's intra-op thread count, fixed or chosen from the machine (``auto``).

``auto`` decides with :class:`trickbag.runtime.AutoThreads` when the run is built and again at every
epoch start (:class:`ThreadCheck`), over the time since the last decision: two reads of
``/proc/stat``, no waiting. The count changes only when the decision does.
"""

from __future__ import annotations

import os

import torch

from trickbag import runtime
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State

__all__ = ["ThreadCheck", "apply_threads"]


class ThreadCheck(Plugin):
    """Re-decide ``train.threads: auto`` at each epoch start; :meth:`report` says what it chose.

    >>> check = ThreadCheck(runtime.AutoThreads(min_window_s=0.0))
    >>> check.report().startswith("auto -> ")
    True
    """

    name = "threads"

    def __init__(self, auto: runtime.AutoThreads) -> None:
        self.auto = auto
        if not auto.threads:
            auto.start()
        self.first = auto.describe()
        self.changes: list[tuple[int, int]] = []  # (epoch, 1-based; new count)

    def on_epoch_start(self, state: State) -> None:
        n = self.auto.recheck()
        if n is not None:
            self.changes.append((state.epoch + 1, n))

    def report(self) -> str:
        """``auto -> 1 (2 cores, 1.0 busy with other processes)``, then the changes (the last five)."""
        shown = self.changes[-5:]
        more = f"{len(self.changes) - len(shown)} changes, then " if len(self.changes) > len(shown) else ""
        later = ", ".join(f"{n} from epoch {e}" for e, n in shown)
        return self.first + (f"; {more}{later}" if later else "")


def apply_threads(threads: int | str | None, deterministic: bool) -> tuple[runtime.AutoThreads | None, str]:
    """Set torch's thread count for ``train.threads``; (an unstarted ``auto`` chooser or None, a report).

    A number is set as given; ``None`` leaves torch's default. ``auto`` returns its chooser, whose
    first window opens now: :class:`ThreadCheck` starts it once the data and model are built, so
    the decision costs no extra wait. ``auto`` with ``deterministic`` takes ``OMP_NUM_THREADS`` or the
    usable cores, never the load: on the CPU the thread count can change the last bits of a
    reduction, and a deterministic rerun must not depend on what else ran.
    """
    if threads is None:
        return None, f"{torch.get_num_threads()} (torch's default)"
    if isinstance(threads, int):
        # tiny models gain nothing from intra-op threads, and lose a lot when a core is busy elsewhere
        torch.set_num_threads(threads)
        return None, f"{threads}"
    if deterministic:
        n = runtime.omp_threads(os.environ.get("OMP_NUM_THREADS")) or runtime.usable_cores()
        torch.set_num_threads(n)
        return None, f"auto -> {n} (deterministic: OMP_NUM_THREADS or the cores, not the load)"
    return runtime.AutoThreads(), ""
