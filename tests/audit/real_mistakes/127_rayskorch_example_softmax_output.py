# Reconstructed after Yard1/ray-skorch PR #18 ("Remove softmax from output": "I don't think there should be a softmax
# in the output layer if you use CrossEntropyLoss since CrossEntropyLoss takes logits as inputs"; merged by the
# maintainer: "Thanks!"): the example's classifier module ended in nn.Softmax and was fitted with
# nn.CrossEntropyLoss as its criterion (the estimator's fit loop is written out here).
import torch
from torch import nn


class MyModule(nn.Module):
    def __init__(self, num_features, num_units=10, nonlin=nn.ReLU()):  # noqa: B008
        super().__init__()
        self.dense0 = nn.Linear(num_features, num_units)
        self.nonlin = nonlin
        self.dropout = nn.Dropout(0.5)
        self.dense1 = nn.Linear(num_units, num_units)
        self.output = nn.Linear(num_units, 2)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, X):
        X = self.nonlin(self.dense0(X))
        X = self.dropout(X)
        X = self.nonlin(self.dense1(X))
        X = self.softmax(self.output(X))
        return X


def fit(module, loader, max_epochs, lr):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    module.train()
    for _ in range(max_epochs):
        for X, y in loader:
            optimizer.zero_grad()
            y_pred = module(X)
            loss = criterion(y_pred, y)  # expect: TB303
            loss.backward()
            optimizer.step()
    return module


def main(loader, num_features):
    return fit(MyModule(num_features), loader, max_epochs=10, lr=0.1)
