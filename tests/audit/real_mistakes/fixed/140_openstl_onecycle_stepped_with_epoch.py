# Fixed version of ../140_openstl_onecycle_stepped_with_epoch.py: silent on the codes that file expects.
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
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},  # not: TB115
        }

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
