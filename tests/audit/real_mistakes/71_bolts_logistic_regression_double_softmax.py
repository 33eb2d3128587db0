# Reconstructed after Lightning-Universe/lightning-bolts issue #654 ("Softmax applied twice when computing loss in
# LogisticRegression": "loss = F.nll_loss(F.log_softmax(F.softmax(self.linear(x))), y)", labelled bug / fix and
# closed with the fix): the model's forward returned softmax probabilities and the training step took their
# log_softmax for the NLL loss.
import torch.nn.functional as F
from torch import nn


class LogisticRegression(nn.Module):
    def __init__(self, input_dim, num_classes):
        super().__init__()
        self.linear = nn.Linear(input_dim, num_classes)

    def forward(self, x):
        return F.softmax(self.linear(x), dim=-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self(x)
        loss = F.cross_entropy(y_hat, y)  # expect: TB303
        return loss
