"""A Lightning-style module: training_step returns the loss, Lightning runs the loop (correct)."""
import torch
import torch.nn.functional as F
import pytorch_lightning as pl


class LitClassifier(pl.LightningModule):
    def __init__(self, model, lr=1e-3, warmup=100):
        super().__init__()
        self.model = model
        self.lr = lr
        self.warmup = warmup

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / self.warmup))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
