"""The progress bar of a run."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional

from trickbag.train.plugin import Plugin
from trickbag.train.state import State

__all__ = ["ProgressBar"]


class ProgressBar(Plugin):
    """A tqdm bar per epoch: ETA, loss, throughput and the latest validation accuracy."""

    def __init__(self, every_steps: int = 10, file: Any = None) -> None:
        self.every_steps = every_steps
        self.file = file
        self.bar = None
        self.last_val: Optional[float] = None
        self._t0 = 0.0
        self._n = 0

    def on_epoch_start(self, state: State) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=state.batches_per_epoch or None,
            initial=0,
            desc=f"epoch {state.epoch + 1}/{state.max_epochs}",
            unit="batch",
            leave=True,
            dynamic_ncols=True,
            file=self.file or sys.stderr,
        )
        self._t0, self._n = time.perf_counter(), 0

    def on_step(self, state: State) -> None:
        if self.bar is None:
            return
        self._n += state.accumulate
        if state.step % self.every_steps == 0:
            self.bar.update(self._n)
            self._n = 0
            post = {"loss": f"{float(state.loss.detach()):.4f}" if state.loss is not None else "-"}
            if self.last_val is not None:
                post["val_acc"] = f"{self.last_val:.4f}"
            self.bar.set_postfix(post, refresh=False)

    def on_epoch_end(self, state: State) -> None:
        if self.bar is None:
            return
        if self.bar.total:
            self.bar.update(self.bar.total - self.bar.n)
        m = state.metrics
        self.last_val = m.get("val/acc", self.last_val)
        post = {"loss": f"{m.get('train/loss', float('nan')):.4f}", "samples/s": f"{m.get('train/samples_per_s', 0):.0f}"}
        if "val/acc" in m:
            post["val_acc"] = f"{m['val/acc']:.4f}"
        self.bar.set_postfix(post)
        self.bar.close()
        self.bar = None

    def on_fit_end(self, state: State) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
