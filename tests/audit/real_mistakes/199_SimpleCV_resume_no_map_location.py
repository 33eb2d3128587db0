# Reconstructed after Z-Zheng/SimpleCV PR #30 ("configure map_location for resuming checkpoint when ddp training", merged, https://github.com/Z-Zheng/SimpleCV/pull/30): Launcher.init() calls CheckPoint.try_resume() in every DDP process, and CheckPoint.load() used a bare torch.load(filepath), so every rank deserialized the model/optimizer tensors back onto the GPU they were saved from (cuda:0), piling extra CUDA contexts and memory onto GPU 0 when resuming distributed training. The fix loads with map_location=torch.device("cpu") and lets load_state_dict move tensors to each rank's device.
import json
import os
import time
from collections import OrderedDict

import torch
import torch.distributed as dist
from torch.nn.utils import clip_grad


def get_rank():
    if not dist.is_initialized():
        return 0
    return dist.get_rank()


class CheckPoint(object):
    MODEL = 'model'
    OPTIMIZER = 'opt'
    GLOBALSTEP = 'global_step'
    LASTCHECKPOINT = 'last'
    CHECKPOINT_NAME = 'checkpoint_info.json'

    def __init__(self, launcher=None):
        self._launcher = launcher
        self._global_step = 0
        self._json_log = {CheckPoint.LASTCHECKPOINT: dict(step=0, name='')}

    @property
    def global_step(self):
        return self._global_step

    def set_global_step(self, value):
        self._global_step = value

    def step(self):
        self._global_step += 1

    def save(self):
        ckpt = OrderedDict({
            CheckPoint.MODEL: self._launcher.model.state_dict(),
            CheckPoint.OPTIMIZER: self._launcher.optimizer.state_dict(),
            CheckPoint.GLOBALSTEP: self.global_step
        })
        filename = 'model-{}.pth'.format(self.global_step)
        torch.save(ckpt, os.path.join(self._launcher.model_dir, filename))
        self._json_log[CheckPoint.LASTCHECKPOINT] = dict(step=self.global_step, name=filename)
        with open(os.path.join(self._launcher.model_dir, CheckPoint.CHECKPOINT_NAME), 'w') as f:
            json.dump(self._json_log, f)

    @staticmethod
    def load(filepath):
        ckpt = torch.load(filepath)  # expect: TB???

        return ckpt

    def try_resume(self):
        model_dir = self._launcher.model_dir
        json_path = os.path.join(model_dir, CheckPoint.CHECKPOINT_NAME)
        if not os.path.exists(json_path):
            return
        with open(json_path, 'r') as f:
            json_log = json.load(f)
        last_path = os.path.join(model_dir, json_log[CheckPoint.LASTCHECKPOINT]['name'])
        ckpt = self.load(last_path)

        self._launcher.model.load_state_dict(ckpt[CheckPoint.MODEL])
        if self._launcher.optimizer is not None:
            self._launcher.optimizer.load_state_dict(ckpt[CheckPoint.OPTIMIZER])
        self.set_global_step(ckpt[CheckPoint.GLOBALSTEP])


class Launcher(object):
    def __init__(self, model_dir, model, optimizer, lr_schedule):
        self._model_dir = model_dir
        self._model = model  # DistributedDataParallel on cuda:local_rank
        self._optimizer = optimizer
        self._lr_schedule = lr_schedule
        self._master = get_rank() == 0
        self._ckpt = CheckPoint(self)

    @property
    def model(self):
        return self._model

    @property
    def optimizer(self):
        return self._optimizer

    @property
    def model_dir(self):
        return self._model_dir

    def apply_gradient(self):
        self._optimizer.step()
        self._optimizer.zero_grad()
        self._lr_schedule.step()
        self._ckpt.step()

    def train_iters(self, train_data_loader, num_iters, save_interval):
        iterator = iter(train_data_loader)
        while self._ckpt.global_step < num_iters:
            start = time.time()
            data = next(iterator)
            self._model.train()
            loss = self._model(*data)
            loss.backward()
            clip_grad.clip_grad_norm_(filter(lambda p: p.requires_grad, self.model.module.parameters()), max_norm=35)
            self.apply_gradient()
            if self._master and self._ckpt.global_step % save_interval == 0:
                self._ckpt.save()
                print('step', self._ckpt.global_step, 'time', time.time() - start)

    def init(self):
        if self._master:
            os.makedirs(self._model_dir, exist_ok=True)
        self._ckpt.try_resume()
