"""Optimizer-side tricks: SAM/ASAM, LR schedules with warm-up, LR scaling, gradient clipping, LR plots.

The schedules can be extended (a new param group) and re-planned (a new length) while they run.

>>> import torch
>>> from trickbag.optim import SAM, build_scheduler, clip_gradients
>>> model = torch.nn.Linear(4, 2)
>>> opt = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
>>> sched = build_scheduler(opt, "cosine", total_steps=100, warmup_steps=5)
>>> opt.param_groups[0]["lr"]  # first update uses lr / (warmup_steps + 1)
0.01666...
"""

from trickbag.optim.clipping import adaptive_clip_gradients, clip_gradients
from trickbag.optim.muon import MuonAdamW, muon_routing
from trickbag.optim.plot import plot_lr
from trickbag.optim.sam import SAM, disable_running_stats, enable_running_stats
from trickbag.optim.schedulers import (
    SCHEDULERS,
    LRSchedule,
    add_param_group,
    build_scheduler,
    replan_schedule,
    scale_lr,
    scaled_lr,
)

__all__ = [
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
