# Reconstructed after jiant-dev/jiant-dev PR #89 ("Minor: re-order optimizer and scheduler steps", merged; it swaps
# the two calls after the "Detected call of lr_scheduler.step() before optimizer.step()" warning): the runner's
# train step stepped the warm-up scheduler of its optimizer/scheduler pair before the optimizer.
import torch


class OptimizerScheduler:
    def __init__(self, optimizer, scheduler):
        self.optimizer = optimizer
        self.scheduler = scheduler

    def step(self):
        self.scheduler.step()  # expect: TB101
        self.optimizer.step()


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
