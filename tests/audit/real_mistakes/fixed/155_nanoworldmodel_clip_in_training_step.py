# Fixed version of ../155_nanoworldmodel_clip_in_training_step.py: silent on the codes that file expects.
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
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        if self.gradient_clip_norm > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.parameters(), self.gradient_clip_norm)  # not: TB???
            self.log("gradient_norm", grad_norm)

    def validation_step(self, batch, batch_idx):
        loss = self.compute_loss(batch)
        self.log("val/loss", loss, sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)
