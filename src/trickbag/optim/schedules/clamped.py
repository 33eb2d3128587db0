"""torch's ``OneCycleLR`` held at its final LR after the end (the scheduler of ``onecycle``)."""

from __future__ import annotations

from typing import Any

from torch.optim import lr_scheduler as lrs

__all__ = ["ClampedOneCycleLR"]


class ClampedOneCycleLR(lrs.OneCycleLR):
    """``torch.optim.lr_scheduler.OneCycleLR`` that stays at its final LR (and momentum) after ``total_steps``
    updates instead of raising.

    >>> import torch
    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    >>> sched = ClampedOneCycleLR(opt, max_lr=0.1, total_steps=4, cycle_momentum=False)
    >>> for _ in range(8):
    ...     opt.step()
    ...     sched.step()
    >>> opt.param_groups[0]["lr"] == 0.1 / 25 / 1e4      # initial_lr / final_div_factor
    True
    """

    def get_lr(self) -> list[Any]:
        t = self.last_epoch
        if t < self.total_steps:
            return super().get_lr()
        self.last_epoch = self.total_steps - 1  # the last update of the cycle: its final value
        try:
            return super().get_lr()
        finally:
            self.last_epoch = t
