"""The events of the training loop, in the order they happen.

::

    FIT_START
      EPOCH_START
        BATCH_START      state.batch (x, y) may be replaced: mixup, cutmix, resizing
        LOSS             state.loss may be replaced/added to: distillation, L1, penalties
                         (inside autocast, once per micro-batch and again in a closure pass)
        AFTER_BACKWARD   once per optimizer update; grads are final and unscaled: clipping, grad-norm logging
                         (a closure optimizer such as SAM: again after the closure pass, on the
                         gradients the update uses, with state.closure_pass=True)
        STEP             after optimizer.step(): EMA update, counters, step-level logging
      EPOCH_END          state.metrics holds the epoch's train and val metrics (plus what plug-ins put
                         in state.extra["epoch_metrics"] during the epoch, e.g. train/grad_norm)
      EVAL_START         before evaluation: EMA weights swapped in, TTA installed
      EVAL_END           after evaluation (state.eval_metrics): swap back
    FIT_END

Plug-ins run in list order on every event except the ``*_END`` events (EPOCH_END, EVAL_END,
FIT_END), where they run in reverse list order, so a plug-in that changed something at the matching
start undoes it after the plug-ins that came later have undone theirs.
"""

from __future__ import annotations

from enum import Enum


class Event(str, Enum):
    FIT_START = "fit_start"
    EPOCH_START = "epoch_start"
    BATCH_START = "batch_start"
    LOSS = "loss"
    AFTER_BACKWARD = "after_backward"
    STEP = "step"
    EPOCH_END = "epoch_end"
    EVAL_START = "eval_start"
    EVAL_END = "eval_end"
    FIT_END = "fit_end"


REVERSED_EVENTS = frozenset({Event.EPOCH_END, Event.EVAL_END, Event.FIT_END})
