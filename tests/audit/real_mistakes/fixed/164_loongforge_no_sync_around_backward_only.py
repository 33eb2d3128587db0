# Fixed version of ../164_loongforge_no_sync_around_backward_only.py: silent on the codes that file expects.
import contextlib

import torch


class VLATrainer:
    def __init__(self, model, optimizer, lr_scheduler, grad_accum_steps, max_grad_norm=1.0):
        self.model = model  # DistributedDataParallel
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.grad_accum_steps = grad_accum_steps
        self.max_grad_norm = max_grad_norm
        self.global_step = 0

    def _grad_sync_ctx(self, is_last_micro_step):
        if is_last_micro_step or not hasattr(self.model, "no_sync"):
            return contextlib.nullcontext()
        return self.model.no_sync()

    def _backward_loss(self, loss):
        loss.backward()

    def train_step(self, micro_batches):
        self.model.train()
        total_loss = 0.0
        n = len(micro_batches)
        for i, batch in enumerate(micro_batches):
            is_last = i == n - 1
            with self._grad_sync_ctx(is_last):  # not: TB111
                outputs = self.model(**batch)
                loss = outputs["loss"] / n
                self._backward_loss(loss)
            total_loss += loss.detach()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.lr_scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        return total_loss
