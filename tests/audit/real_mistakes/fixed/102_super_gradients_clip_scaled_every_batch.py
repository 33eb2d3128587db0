# Fixed version of ../102_super_gradients_clip_scaled_every_batch.py: silent on the codes that file expects.
import torch


class Trainer:
    def __init__(self, net, optimizer, scaler, batch_accumulate, clip_grad_norm):
        self.net = net
        self.optimizer = optimizer
        self.scaler = scaler
        self.batch_accumulate = batch_accumulate
        self.clip_grad_norm = clip_grad_norm

    def _backward_step(self, loss, batch_idx):
        self.scaler.scale(loss).backward()
        if (batch_idx + 1) % self.batch_accumulate == 0:
            if self.clip_grad_norm:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.clip_grad_norm)  # not: TB106, TB109
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad()

    def train_epoch(self, loader, criterion):
        self.net.train()
        for batch_idx, (inputs, targets) in enumerate(loader):
            with torch.autocast("cuda"):
                loss = criterion(self.net(inputs), targets) / self.batch_accumulate
            self._backward_step(loss, batch_idx)
