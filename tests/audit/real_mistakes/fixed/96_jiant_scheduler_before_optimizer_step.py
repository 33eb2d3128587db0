# Fixed version of ../96_jiant_scheduler_before_optimizer_step.py: silent on the codes that file expects.
import torch


class OptimizerScheduler:
    def __init__(self, optimizer, scheduler):
        self.optimizer = optimizer
        self.scheduler = scheduler

    def step(self):
        self.optimizer.step()
        self.scheduler.step()  # not: TB101


class JiantRunner:
    def __init__(self, model, optimizer, num_train_steps, warmup_steps):
        self.model = model
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min(1.0, (s + 1) / warmup_steps) * max(0.0, 1 - s / num_train_steps))
        self.optimizer_scheduler = OptimizerScheduler(optimizer, scheduler)

    def run_train_step(self, batch):
        self.model.train()
        loss = self.model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer_scheduler.step()
        self.model.zero_grad()
        return loss.item()

    def run_train(self, loader):
        for batch in loader:
            self.run_train_step(batch)
