# Reconstructed after CyberDataLab/nebula issue #15 ("MLPs apply `torch.nn.CrossEntropyLoss` on `log_softmax` outputs", confirmed and fixed by the maintainer in commit cb478b0, https://github.com/CyberDataLab/nebula/issues/15): the MNIST/FashionMNIST/EMNIST/syscall MLP models (nebula/core/models/*/mlp.py) ended forward() with torch.log_softmax(x, dim=1) while NebulaModel.step() fed that output to self.criterion = torch.nn.CrossEntropyLoss(), which applies log_softmax again, so every federated node trained and validated on a doubly-normalised loss. The fix deletes the log_softmax line so forward() returns logits.
# Fixed version (the merged PR applied).
import logging

import lightning as pl
import torch
from torchmetrics import MetricCollection
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score

logging_training = logging.getLogger("nebula.training")


class NebulaModel(pl.LightningModule):
    """Base class of the NEBULA models: the shared train/validation/test step."""

    def __init__(self, input_channels=1, num_classes=10, learning_rate=1e-3, metrics=None, seed=None):
        super().__init__()
        self.input_channels = input_channels
        self.num_classes = num_classes
        self.learning_rate = learning_rate
        if metrics is None:
            metrics = MetricCollection([
                MulticlassAccuracy(num_classes=num_classes),
                MulticlassF1Score(num_classes=num_classes),
            ])
        self.train_metrics = metrics.clone(prefix="Train/")
        self.val_metrics = metrics.clone(prefix="Validation/")
        if seed is not None:
            torch.manual_seed(seed)
            torch.cuda.manual_seed_all(seed)
        self.global_number = {"Train": 0, "Validation": 0}

    def process_metrics(self, phase, y_pred, y, loss=None):
        y_pred_classes = torch.argmax(y_pred, dim=1).detach()
        if phase == "Train":
            self.log(f"{phase}/Loss", loss.detach())
            self.train_metrics.update(y_pred_classes, y.detach())
        elif phase == "Validation":
            self.val_metrics.update(y_pred_classes, y.detach())

    def step(self, batch, batch_idx, phase):
        """Training/validation/test step."""
        x, y = batch
        y_pred = self.forward(x)
        loss = self.criterion(y_pred, y)
        self.process_metrics(phase, y_pred, y, loss)
        return loss

    def training_step(self, batch, batch_idx):
        return self.step(batch, batch_idx=batch_idx, phase="Train")

    def on_train_epoch_end(self):
        output = self.train_metrics.compute()
        logging_training.info(f"Train metrics: {output}")
        self.train_metrics.reset()
        self.global_number["Train"] += 1

    def validation_step(self, batch, batch_idx):
        return self.step(batch, batch_idx=batch_idx, phase="Validation")

    def on_validation_epoch_end(self):
        output = self.val_metrics.compute()
        logging_training.info(f"Validation metrics: {output}")
        self.val_metrics.reset()
        self.global_number["Validation"] += 1


class MNISTModelMLP(NebulaModel):
    def __init__(self, input_channels=1, num_classes=10, learning_rate=1e-3, metrics=None, seed=None):
        super().__init__(input_channels, num_classes, learning_rate, metrics, seed)

        self.example_input_array = torch.zeros(1, 1, 28, 28)
        self.learning_rate = learning_rate
        self.criterion = torch.nn.CrossEntropyLoss()
        self.l1 = torch.nn.Linear(28 * 28, 256)
        self.l2 = torch.nn.Linear(256, 128)
        self.l3 = torch.nn.Linear(128, num_classes)

    def forward(self, x):
        batch_size, channels, width, height = x.size()
        x = x.view(batch_size, -1)
        x = self.l1(x)
        x = torch.relu(x)
        x = self.l2(x)
        x = torch.relu(x)
        x = self.l3(x)  # not: TB???
        return x

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.learning_rate)
        return optimizer
