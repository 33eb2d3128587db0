# Reconstructed after chengtan9907/OpenSTL issue #113 ("Fix a bug for onecycle scheduler usage in Pytorch Lightening
# Version", https://github.com/chengtan9907/OpenSTL/issues/113): the LightningModule returned a per-step ("interval":
# "step") OneCycleLR from configure_optimizers but overrode lr_scheduler_step to call
# scheduler.step(epoch=self.current_epoch), so every batch set the schedule's position to the epoch number and the
# one-cycle curve was never followed (a performance drop).  The maintainer removed the override ("I have fixed this
# bug in the commit a6e0dd3"), letting Lightning call scheduler.step() once per optimizer step.
import lightning as l
import torch
import torch.nn as nn


class BaseMethod(l.LightningModule):
    def __init__(self, model: nn.Module, lr: float, epoch: int, steps_per_epoch: int):
        super().__init__()
        self.model = model
        self.lr, self.epochs, self.steps_per_epoch = lr, epoch, steps_per_epoch
        self.criterion = nn.MSELoss()

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.model.parameters(), lr=self.lr)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=self.lr, epochs=self.epochs, steps_per_epoch=self.steps_per_epoch
        )
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    def lr_scheduler_step(self, scheduler, *args, **kwargs):
        scheduler.step(epoch=self.current_epoch)  # expect: TB115

    def forward(self, batch_x):
        return self.model(batch_x)

    def training_step(self, batch, batch_idx):
        batch_x, batch_y = batch
        pred_y = self(batch_x)
        loss = self.criterion(pred_y, batch_y)
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        batch_x, batch_y = batch
        pred_y = self(batch_x)
        loss = self.criterion(pred_y, batch_y)
        self.log("val_loss", loss, on_step=False, on_epoch=True, prog_bar=False)
        return loss
