# Reconstructed after torch-points3d/torch-points3d PR #630 ("Fix LR Checkpoint Resuming", merged, https://github.com/torch-points3d/torch-points3d/pull/630): when resuming, Checkpoint.get_optimizer built the optimizer and loaded its saved state (with the decayed lr) first, and get_schedulers then built the LR scheduler on that optimizer, which resets the param-group lr to the initial value, so resumed runs restarted from the original learning rate. The author (CCInc) moved the optimizer.load_state_dict after scheduler construction (commit ad6f6a8, load_optim_sched); reviewed/merged by the maintainer nicolas-chaulet ("Thanks, that must have been broken at some point").
# Fixed version (the merged PR applied: optimizer state loaded only after the schedulers are built).
import logging

import torch
from omegaconf import OmegaConf
from torch_points3d.core.schedulers.lr_schedulers import instantiate_scheduler
from torch_points3d.core.schedulers.bn_schedulers import instantiate_bn_scheduler

log = logging.getLogger(__name__)


class Checkpoint:
    def __init__(self, optimizer, schedulers, run_config, filled=True):
        self.optimizer = optimizer          # (class name, state_dict)
        self.schedulers = schedulers        # {type: (opt, state_dict)}
        self.run_config = run_config
        self._filled = filled

    @property
    def is_empty(self):
        return not self._filled

    def load_optim_sched(self, model, load_state=True):
        if not self.is_empty:
            # initialize optimizer
            optimizer_config = self.optimizer
            optimizer_cls = getattr(torch.optim, optimizer_config[0])
            optimizer_params = OmegaConf.create(self.run_config).training.optim.optimizer.params
            model.optimizer = optimizer_cls(model.parameters(), **optimizer_params)

            # initialize & load schedulers
            schedulers_out = {}
            for scheduler_type, (scheduler_opt, scheduler_state) in self.schedulers.items():
                if scheduler_type == "lr_scheduler":
                    optimizer = model.optimizer
                    scheduler = instantiate_scheduler(optimizer, OmegaConf.create(scheduler_opt))
                    if load_state:
                        scheduler.load_state_dict(scheduler_state)
                    schedulers_out["lr_scheduler"] = scheduler
                elif scheduler_type == "bn_scheduler":
                    scheduler = instantiate_bn_scheduler(model, OmegaConf.create(scheduler_opt))
                    if load_state:
                        scheduler.load_state_dict(scheduler_state)
                    schedulers_out["bn_scheduler"] = scheduler

            # load optimizer
            model.schedulers = schedulers_out
            if load_state:
                model.optimizer.load_state_dict(optimizer_config[1])  # not: TB???


class ModelCheckpoint(object):
    def __init__(self, checkpoint, resume=True):
        self._checkpoint = checkpoint
        self._resume = resume

    def create_model(self, model, state_dict):
        if not self._checkpoint.is_empty:
            model.load_state_dict(state_dict, strict=False)
            self._checkpoint.load_optim_sched(model, load_state=self._resume)
        return model
