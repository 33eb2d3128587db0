# Reconstructed after pytorch/examples issue #1196 ("add scaler.unscale_(optimizer) before clip_grad_norm_"):
# minGPT-ddp's _run_batch splits the update into an AMP branch and a plain branch; the AMP branch clips the
# gradients while they are still multiplied by the loss scale.
import torch


class Trainer:
    def __init__(self, model, optimizer, config):
        self.model = model
        self.optimizer = optimizer
        self.config = config
        self.scaler = torch.amp.GradScaler("cuda", enabled=config.use_amp)

    def _run_batch(self, source, targets, train=True):
        with torch.set_grad_enabled(train), torch.autocast("cuda", dtype=torch.float16, enabled=self.config.use_amp):
            _, loss = self.model(source, targets)
        if train:
            self.optimizer.zero_grad(set_to_none=True)
            if self.config.use_amp:
                self.scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)  # expect: TB106
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.optimizer.step()
        return loss.item()
