"""Optimizer-side tricks: SAM/ASAM, LR schedules with warm-up, LR scaling, gradient clipping, LR plots.

The schedules can be extended (a new param group) and re-planned (a new length) while they run; each is
one module of :mod:`trickbag.optim.schedules`. The names here are loaded when first used, so the recipe
can read the schedules' options (:mod:`trickbag.optim.schedules`) without importing torch.

>>> import torch
>>> from trickbag.optim import SAM, build_scheduler, clip_gradients
>>> model = torch.nn.Linear(4, 2)
>>> opt = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
>>> sched = build_scheduler(opt, "cosine", total_steps=100, warmup_steps=5)
>>> opt.param_groups[0]["lr"]  # first update uses lr / (warmup_steps + 1)
0.01666...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trickbag._optional import lazy_exports

if TYPE_CHECKING:
    from trickbag.optim.clipping import adaptive_clip_gradients, clip_gradients
    from trickbag.optim.lr_scheduler import (
        SCHEDULERS,
        LRSchedule,
        add_param_group,
        build_scheduler,
        replan_schedule,
        scale_lr,
        scaled_lr,
    )
    from trickbag.optim.muon import Muon, MuonAdamW, muon_routing
    from trickbag.optim.plot import plot_lr
    from trickbag.optim.sam import SAM, disable_running_stats, enable_running_stats

_EXPORTS: dict[str, str] = {
    "adaptive_clip_gradients": "trickbag.optim.clipping",
    "clip_gradients": "trickbag.optim.clipping",
    "Muon": "trickbag.optim.muon",
    "MuonAdamW": "trickbag.optim.muon",
    "muon_routing": "trickbag.optim.muon",
    "plot_lr": "trickbag.optim.plot",
    "SAM": "trickbag.optim.sam",
    "disable_running_stats": "trickbag.optim.sam",
    "enable_running_stats": "trickbag.optim.sam",
    "SCHEDULERS": "trickbag.optim.lr_scheduler",
    "LRSchedule": "trickbag.optim.lr_scheduler",
    "add_param_group": "trickbag.optim.lr_scheduler",
    "build_scheduler": "trickbag.optim.lr_scheduler",
    "replan_schedule": "trickbag.optim.lr_scheduler",
    "scale_lr": "trickbag.optim.lr_scheduler",
    "scaled_lr": "trickbag.optim.lr_scheduler",
}

__all__ = [
    "Muon",
    "MuonAdamW",
    "muon_routing",
    "scale_lr",
    "SAM",
    "SCHEDULERS",
    "LRSchedule",
    "adaptive_clip_gradients",
    "add_param_group",
    "build_scheduler",
    "clip_gradients",
    "disable_running_stats",
    "enable_running_stats",
    "plot_lr",
    "replan_schedule",
    "scaled_lr",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
