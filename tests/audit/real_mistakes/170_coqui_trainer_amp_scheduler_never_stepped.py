# Reconstructed after idiap/coqui-ai-Trainer issue #23 ("[Bug] Scheduler is never stepped if mixed_precision and
# scheduler_after_epoch are enabled", https://github.com/idiap/coqui-ai-Trainer/issues/23): after #20 the trainer
# steps an epoch-level scheduler only if its optimizer actually stepped during the epoch, "but the optimizer is
# never marked as stepped when `use_amp_scaler` is true", so with mixed precision the learning rate stayed constant
# for the whole run.  The maintainer (eginhard) thanked the reporter and released the fix in 0.3.2: the AMP branch
# also records the step when the GradScaler did not skip it.
import torch


class Trainer:
    def __init__(self, model, optimizer, scheduler, config, use_amp_scaler):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.config = config
        self.use_amp_scaler = use_amp_scaler
        self.scaler = torch.amp.GradScaler("cuda") if use_amp_scaler else None
        self.optimizer_stepped = False

    def optimize(self, batch, criterion):
        with torch.autocast("cuda", enabled=self.use_amp_scaler):
            outputs = self.model(batch["input"])
            loss = criterion(outputs, batch["target"])
        step_optimizer = True
        if self.use_amp_scaler:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
            scale_prev = self.scaler.get_scale()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            step_optimizer = scale_prev <= self.scaler.get_scale()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
            self.optimizer.step()
        if step_optimizer and not self.config.scheduler_after_epoch:
            self.scheduler.step()
        if step_optimizer and not self.use_amp_scaler:  # expect: TB???
            self.optimizer_stepped = True
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def train_epoch(self, loader, criterion):
        self.model.train()
        self.optimizer_stepped = False
        for batch in loader:
            self.optimize(batch, criterion)
        if self.config.scheduler_after_epoch and self.optimizer_stepped:
            self.scheduler.step()
