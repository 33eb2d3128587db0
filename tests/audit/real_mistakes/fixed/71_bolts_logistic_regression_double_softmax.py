# Fixed version of ../71_bolts_logistic_regression_double_softmax.py: silent on the codes that file expects.
import torch.nn.functional as F
from torch import nn


class LogisticRegression(nn.Module):
    def __init__(self, input_dim, num_classes):
        super().__init__()
        self.linear = nn.Linear(input_dim, num_classes)

    def forward(self, x):
        return self.linear(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self(x)
        loss = F.cross_entropy(y_hat, y)  # not: TB303
        return loss
