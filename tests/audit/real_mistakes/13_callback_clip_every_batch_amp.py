# Reconstructed after catalyst-team/catalyst issue #1319 ("Unscale gradients before gradient clipping"): the
# OptimizerCallback clipped on every batch, straight after the AMP engine's scaled backward, before unscaling
# and also on the micro-batches that do not step.
import torch


class AMPEngine:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def backward_loss(self, loss, model, optimizer):
        self.scaler.scale(loss).backward()

    def optimizer_step(self, loss, model, optimizer):
        self.scaler.step(optimizer)
        self.scaler.update()

    def zero_grad(self, loss, model, optimizer):
        optimizer.zero_grad()


class OptimizerCallback:
    def __init__(self, engine, model, optimizer, accumulation_steps, max_norm):
        self.engine, self.model, self.optimizer = engine, model, optimizer
        self.accumulation_steps = accumulation_steps
        self.max_norm = max_norm
        self._accumulation_counter = 0

    def on_batch_end(self, loss):
        self._accumulation_counter += 1
        need_gradient_step = self._accumulation_counter % self.accumulation_steps == 0
        self.engine.backward_loss(loss, self.model, self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)  # expect: TB106, TB109
        if need_gradient_step:
            self.engine.optimizer_step(loss, self.model, self.optimizer)
            self.engine.zero_grad(loss, self.model, self.optimizer)
