"""The events of the training loop, in the order they happen.

::

    FIT_START
      EPOCH_START
        BATCH_START      state.batch (x, y) may be replaced: mixup, cutmix, resizing
        LOSS             state.loss may be replaced/added to: distillation, L1, penalties
                         (inside autocast, once per micro-batch and again in a closure pass)
        AFTER_BACKWARD   once per optimizer update; grads are final and unscaled: grad-norm logging
                         (a closure optimizer such as SAM: again after the closure pass, on the
                         gradients the update uses, with state.closure_pass=True); the trainer then
                         checks them (non-finite guard), clips them and steps the optimizer
        STEP             after optimizer.step() and the schedule: EMA update, step-level logging
        CHECKPOINT       after STEP (state.epoch_done False): step checkpoints
      EVAL_START         before validation (every eval_every epochs): EMA weights swapped in, TTA installed
      EVAL_END           after validation (state.eval_metrics): swap back
      EPOCH_END          state.metrics holds the epoch's train and val metrics (plus state.epoch_metrics,
                         e.g. train/grad_norm): early stopping, loggers
      CHECKPOINT         after EPOCH_END (state.epoch_done True): last.pt, best.pt
    FIT_END              (a run stopped inside an epoch: its last CHECKPOINT was the one after that STEP,
                         with state.should_stop set)

Plug-ins run in list order on every event except the ``*_END`` events (EVAL_END, EPOCH_END,
FIT_END), where they run in reverse list order, so a plug-in that changed something at the matching
start undoes it after the plug-ins that came later have undone theirs. CHECKPOINT comes after every
plug-in has finished with the point it records, whatever the list order.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Event", "REVERSED_EVENTS"]


class Event(str, Enum):
    FIT_START = "fit_start"
    EPOCH_START = "epoch_start"
    BATCH_START = "batch_start"
    LOSS = "loss"
    AFTER_BACKWARD = "after_backward"
    STEP = "step"
    EVAL_START = "eval_start"
    EVAL_END = "eval_end"
    EPOCH_END = "epoch_end"
    CHECKPOINT = "checkpoint"
    FIT_END = "fit_end"


REVERSED_EVENTS = frozenset({Event.EVAL_END, Event.EPOCH_END, Event.FIT_END})
