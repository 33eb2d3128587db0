# Fixed version of ../120_parlai_scheduler_before_optimizer_step.py: silent on the codes that file expects.
import torch


class TorchAgent:
    def __init__(self, model, optimizer, warmup_scheduler, clip):
        self.model = model
        self.optimizer = optimizer
        self.warmup_scheduler = warmup_scheduler
        self.clip = clip
        self._number_training_updates = 0

    def update_params(self):
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self._number_training_updates += 1
        self.optimizer.step()
        self.warmup_scheduler.step(epoch=self._number_training_updates)  # not: TB101

    def train_step(self, batch):
        self.model.train()
        self.optimizer.zero_grad()
        loss = self.model(batch.text_vec, batch.label_vec).mean()
        loss.backward()
        self.update_params()
