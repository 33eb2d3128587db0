# Reconstructed after simchowitzlabpublic/nano-world-model PR #22 ("Clip gradients in configure_gradient_clipping
# instead of training_step", https://github.com/simchowitzlabpublic/nano-world-model/pull/22): the LightningModule
# called clip_grad_norm_ inside training_step, i.e. before Lightning runs backward() for that step, so it clipped
# either None or the previous step's stale gradients and the gradient actually used by optimizer.step() was never
# capped (with accumulation it also shrank partial sums mid-accumulation); the logged gradient_norm was one step
# stale.  The merged PR moves the clip into configure_gradient_clipping, which Lightning runs after backward and
# once per optimizer step.
import pytorch_lightning as pl
import torch
import torch.nn.functional as F


class WorldModelModule(pl.LightningModule):
    def __init__(self, model: torch.nn.Module, lr: float = 3e-4, gradient_clip_norm: float = 1.0):
        super().__init__()
        self.model = model
        self.lr = lr
        self.gradient_clip_norm = gradient_clip_norm

    def compute_loss(self, batch):
        frames, actions = batch["frames"], batch["actions"]
        pred = self.model(frames[:, :-1], actions[:, :-1])
        return F.mse_loss(pred, frames[:, 1:])

    def training_step(self, batch, batch_idx):
        loss = self.compute_loss(batch)
        if self.gradient_clip_norm > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.parameters(), self.gradient_clip_norm)  # expect: TB???
            self.log("gradient_norm", grad_norm)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        loss = self.compute_loss(batch)
        self.log("val/loss", loss, sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)
