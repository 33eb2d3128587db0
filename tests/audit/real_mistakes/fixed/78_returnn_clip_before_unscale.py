# Fixed version of ../78_returnn_clip_before_unscale.py: silent on the codes that file expects.
import torch


class Engine:
    def __init__(self, model, optimizer, grad_clip=None, use_amp=True):
        self.model = model
        self.optimizer = optimizer
        self.grad_clip = grad_clip
        self._grad_scaler = torch.cuda.amp.GradScaler(enabled=use_amp)

    def train_step(self, batch, loss_fn):
        self.optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(self.model(batch))
        self._grad_scaler.scale(loss).backward()
        self._grad_scaler.unscale_(self.optimizer)
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)  # not: TB106
        self._grad_scaler.step(self.optimizer)
        self._grad_scaler.update()
