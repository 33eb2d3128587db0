# Reconstructed after ariecattan/SciCo issue #2 ("Double-softmax in validation loss"): the LightningModule's
# forward returned softmax probabilities and validation_step fed self(x) to CrossEntropyLoss, which applies
# log_softmax again (the loss could not go below ~0.74).
import torch
import torch.nn.functional as F
from torch import nn


class MulticlassModel(nn.Module):
    def __init__(self, encoder, hidden, num_classes):
        super().__init__()
        self.encoder = encoder
        self.linear = nn.Linear(hidden, num_classes)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, input_ids, attention_mask):
        hidden = self.encoder(input_ids, attention_mask)
        return F.softmax(self.linear(hidden), dim=-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        scores = self.linear(self.encoder(*x))
        return self.criterion(scores, y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self(*x)
        loss = self.criterion(y_hat, y)  # expect: TB303
        return loss

    @torch.no_grad()
    def predict(self, x):
        return self(*x).argmax(-1)
