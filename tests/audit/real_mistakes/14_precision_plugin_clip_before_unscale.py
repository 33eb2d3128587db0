# Reconstructed after Lightning-AI/pytorch-lightning issue #9599 ("Clip norm after scaler.unscale_ in native
# fp16 training", also #9330): the loop clipped right after the scaled backward, while the scaler unscaled the
# gradients only later in its pre-optimizer hook, so the clip threshold applied to scaled gradients.
import torch


class NativeMixedPrecision:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cuda")

    def backward(self, loss):
        self.scaler.scale(loss).backward()

    def pre_optimizer_step(self, optimizer):
        self.scaler.unscale_(optimizer)

    def optimizer_step(self, optimizer):
        self.scaler.step(optimizer)
        self.scaler.update()


class Loop:
    def __init__(self, module, optimizer, precision, gradient_clip_val):
        self.module, self.optimizer, self.precision = module, optimizer, precision
        self.gradient_clip_val = gradient_clip_val

    def clip_gradients(self):
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.gradient_clip_val)  # expect: TB106

    def run_batch(self, batch):
        loss = self.module.training_step(batch)
        self.precision.backward(loss)
        self.clip_gradients()  # also-ok: TB106
        self.precision.pre_optimizer_step(self.optimizer)
        self.precision.optimizer_step(self.optimizer)
        self.optimizer.zero_grad()
