"""Weight averages updated per micro-batch through free-standing helpers (not ``ema.update``)."""
import contextlib

import torch
from ema_utils import ema_step


class Distiller:
    def __init__(self, model, loader, accum=8, tau=0.998):
        self.model = model
        self.ema_net = torch.optim.swa_utils.AveragedModel(model)
        self.loader = loader
        self.accum = accum
        self.tau = tau
        self.opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    @torch.no_grad()
    def _refresh_average(self):
        for avg, cur in zip(self.ema_net.module.parameters(), self.model.parameters()):
            avg.lerp_(cur, 1.0 - self.tau)

    def run(self):
        it = iter(self.loader)
        step = 0
        while step < 10_000:
            x = next(it)
            boundary = (step + 1) % self.accum == 0
            ctx = contextlib.nullcontext() if boundary else self.model.no_sync()
            with ctx:
                (self.model(x).loss / self.accum).backward()
            self._refresh_average()  # expect: TB108
            if boundary:
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
            step += 1


def finetune(student, teacher_ema, batches, optimizer, grad_accum=4):
    for i, (src, tgt) in enumerate(batches):
        out = student(src, labels=tgt)
        (out.loss / grad_accum).backward()
        if (i + 1) % grad_accum != 0:
            ema_step(teacher_ema, student)  # expect: TB108
            continue
        optimizer.step()
        optimizer.zero_grad()
