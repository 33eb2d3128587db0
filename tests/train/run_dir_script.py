"""A hand-built Trainer with a run folder, four tricks (two drawing random numbers) and step checkpoints:
``python run_dir_script.py RUN [--resume] [--kill-at N]``. ``--kill-at N`` ends the process with SIGKILL right
after update N (no clean-up, as a power cut or the kernel's OOM killer would)."""

from __future__ import annotations

import argparse
import os
import random
import signal

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from trickbag.data.sampler import EpochSampler
from trickbag.plugin.interface import Plugin
from trickbag.train.plugins.run_folder import RunFolder
from trickbag.train.trainer import Trainer


class KillAt(Plugin):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step(self, state) -> None:
        if state.step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class StartAt(Plugin):
    def on_fit_start(self, state) -> None:
        print(f"start step={state.step}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--kill-at", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    random.seed(0)  # what an exact run seeds: every generator its checkpoints hold
    np.random.seed(0)
    torch.manual_seed(0)
    x = torch.randn(96, 1, 8, 8)
    y = (x.mean(dim=(1, 2, 3)) > 0).long()
    ds = TensorDataset(x, y)
    train = DataLoader(ds, batch_size=16, sampler=EpochSampler(len(ds), seed=0))
    val = DataLoader(TensorDataset(x[:32], y[:32]), batch_size=32)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.AdaptiveAvgPool2d(3), torch.nn.Flatten(), torch.nn.Linear(4 * 9, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = Trainer(model, opt, train, val, max_epochs=3, device="cpu", seed=1,
                      tricks={"ema": {"decay": 0.9}, "mix": {"mixup_alpha": 0.2}, "label_smoothing": {},
                              "multiscale": {"train_sizes": [6, 7, 8], "finetune_epochs": 1}},
                      scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=7, gamma=0.5),
                      plugins=[StartAt(), *([KillAt(a.kill_at)] if a.kill_at else [])],
                      run_dir=RunFolder(path=a.run, checkpoint_every_steps=4, progress="lines"))
    state = trainer.fit(resume=a.resume)
    print(f"done epoch={state.epoch} step={state.step}")


if __name__ == "__main__":
    main()
