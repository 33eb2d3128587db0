"""Progress of a run, for a person: a bar on a terminal, plain lines in a log file.

On a terminal (``file.isatty()``) a tqdm bar per epoch shows the batch, the epoch's ETA, the loss,
throughput, the monitored metric and the run's ETA. Anywhere else (redirected to a file, a CI log,
``run.progress=false``) it prints one plain line per epoch, and a line every ``log_every_s`` seconds
inside a long epoch; never a carriage return.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import State

__all__ = ["ProgressBar", "format_duration"]


def format_duration(seconds: float) -> str:
    """``"45s"``, ``"3m07s"``, ``"2h05m"``; ``"?"`` when unknown.

    >>> format_duration(45.2), format_duration(187), format_duration(7500), format_duration(float("nan"))
    ('45s', '3m07s', '2h05m', '?')
    """
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class ProgressBar(Plugin):
    """A bar per epoch on a terminal, plain lines elsewhere (see the module docstring).

    Args:
        every_steps: bar refresh interval, in updates.
        file: where it writes (default ``sys.stderr``).
        monitor / mode: the metric shown with its best so far.
        bar: True / False forces the bar / plain lines; None chooses by ``file.isatty()``.
        log_every_s: plain lines inside an epoch at most this often.
    """

    def __init__(self, every_steps: int = 10, file: Any = None, *, monitor: str = "val/acc", mode: str = "max",
                 bar: bool | None = None, log_every_s: float = 30.0) -> None:
        self.every_steps, self.file = every_steps, file
        self.monitor, self.mode = monitor, mode
        self.use_bar = bar
        self.log_every_s = log_every_s
        self.bar: Any = None
        self.best: float | None = None
        self._epoch_times: list[float] = []
        self._t0 = self._last_line = 0.0

    def _out(self) -> Any:
        return self.file or sys.stderr

    def _bar_wanted(self) -> bool:
        if self.use_bar is not None:
            return self.use_bar
        isatty = getattr(self._out(), "isatty", None)
        return bool(isatty and isatty())

    def _run_eta(self, state: State, epoch_left: float) -> float:
        per_epoch = sum(self._epoch_times) / len(self._epoch_times) if self._epoch_times else float("nan")
        return epoch_left + per_epoch * max(0, state.max_epochs - state.epoch - 1)

    def _monitored(self) -> str:
        if self.best is None:
            return ""
        return f"{self.monitor} best {self.best:.4f}"

    def on_epoch_start(self, state: State) -> None:
        self._t0 = self._last_line = time.perf_counter()
        if self._bar_wanted():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.batches_per_epoch or None, desc=f"epoch {state.epoch + 1}/{state.max_epochs}",
                            unit="batch", leave=True, dynamic_ncols=True, file=self._out())

    def _catch_up(self, done: int) -> None:
        """Move the bar to ``done`` batches of the epoch (counted by batch index, so a short last update
        with accumulation, or a resume inside the epoch, lands exactly)."""
        if self.bar is not None and done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def on_step(self, state: State) -> None:
        if self.bar is not None:
            if state.step % self.every_steps == 0:
                self._catch_up(state.batch_idx + 1)
                post = {"loss": f"{float(state.loss.detach()):.4f}" if state.loss is not None else "-"}
                if self.best is not None:
                    post[self.monitor] = f"{self.best:.4f}"
                rate = self.bar.format_dict.get("rate") or 0
                left = (self.bar.total - self.bar.n) / rate if rate and self.bar.total else float("nan")
                post["run ETA"] = format_duration(self._run_eta(state, left))
                self.bar.set_postfix(post, refresh=False)
            return
        now = time.perf_counter()
        if now - self._last_line >= self.log_every_s and state.batches_per_epoch:
            self._last_line = now
            done = state.batch_idx + 1
            left = (now - self._t0) / done * (state.batches_per_epoch - done)
            loss = f"{float(state.loss.detach()):.4f}" if state.loss is not None else "-"
            print(f"epoch {state.epoch + 1}/{state.max_epochs}  batch {done}/{state.batches_per_epoch}  loss {loss}  "
                  f"epoch ETA {format_duration(left)}  run ETA {format_duration(self._run_eta(state, left))}",
                  file=self._out(), flush=True)

    def on_epoch_end(self, state: State) -> None:
        m = state.metrics
        self._epoch_times.append(time.perf_counter() - self._t0)
        value = m.get(self.monitor)
        if value is not None and math.isfinite(value) and (
                self.best is None or (value > self.best if self.mode == "max" else value < self.best)):
            self.best = float(value)
        shown = [f"loss {m.get('train/loss', float('nan')):.4f}"]
        hidden = ("val/n", "val/kept_averaged")
        shown += [f"{k} {v:.4f}" for k, v in m.items()
                  if k.startswith("val/") and k not in hidden and not k.endswith(("_raw", "_ema"))]
        if self.bar is not None:
            # the refresh runs every `every_steps` updates: the batches after the last one are counted here
            self._catch_up(state.batches_per_epoch)
            self.bar.set_postfix_str("  ".join(shown))
            self.bar.close()
            self.bar = None
            return
        best = f"  ({self._monitored()})" if self.best is not None else ""
        print(f"epoch {state.epoch + 1}/{state.max_epochs}  {'  '.join(shown)}{best}  "
              f"{format_duration(self._epoch_times[-1])}  run ETA {format_duration(self._run_eta(state, 0.0))}",
              file=self._out(), flush=True)

    def on_fit_end(self, state: State) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
