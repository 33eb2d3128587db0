# Fixed version of ../104_holocron_lr_finder_scheduler_per_micro_batch.py: silent on the codes that file expects.
import math

import torch


class Trainer:
    def __init__(self, model, train_loader, criterion, optimizer, gradient_acc=1):
        self.model = model
        self.train_loader = train_loader
        self.criterion = criterion
        self.optimizer = optimizer
        self.gradient_acc = gradient_acc
        self._grad_count = 0

    def _backprop_step(self, loss):
        (loss / self.gradient_acc).backward()
        self._grad_count += 1
        if self._grad_count == self.gradient_acc:
            self.optimizer.step()
            self.optimizer.zero_grad()
            self._grad_count = 0
            return True
        return False

    def find_lr(self, start_lr=1e-7, end_lr=1.0, num_it=100):
        self.model.train()
        for group in self.optimizer.param_groups:
            group["lr"] = start_lr
        gamma = (end_lr / start_lr) ** (1 / (num_it - 1))
        scheduler = torch.optim.lr_scheduler.MultiplicativeLR(self.optimizer, lambda step: gamma)
        lr_recorder, loss_recorder = [], []
        for batch_idx, (x, target) in enumerate(self.train_loader):
            loss = self.criterion(self.model(x), target)
            if self._backprop_step(loss):
                scheduler.step()  # not: TB102
            lr_recorder.append(self.optimizer.param_groups[0]["lr"])
            loss_recorder.append(loss.item())
            if batch_idx + 1 == num_it or not math.isfinite(loss.item()):
                break
        return lr_recorder, loss_recorder
