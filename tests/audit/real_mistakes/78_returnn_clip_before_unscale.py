# Reconstructed after rwth-i6/returnn PR #1595 ("Torch: unscale gradients before noise and clipping", fixes #1590,
# merged): with a GradScaler the engine clipped the gradient norm while the gradients were still multiplied by the
# loss scale.
import torch


class Engine:
    def __init__(self, model, optimizer, grad_clip=None, use_amp=True):
        self.model = model
        self.optimizer = optimizer
        self.grad_clip = grad_clip
        self._grad_scaler = torch.cuda.amp.GradScaler(enabled=use_amp)

    def train_step(self, batch, loss_fn):
        self.optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(self.model(batch))
        self._grad_scaler.scale(loss).backward()
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)  # expect: TB106
        self._grad_scaler.step(self.optimizer)
        self._grad_scaler.update()
