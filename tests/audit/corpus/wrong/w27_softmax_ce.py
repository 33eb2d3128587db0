import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.body(x)


def train(loader):
    model = Classifier()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters())
    for xb, yb in loader:
        optimizer.zero_grad()
        probs = torch.softmax(model(xb), dim=1)
        loss = criterion(probs, yb)  # expect: TB303
        loss.backward()
        optimizer.step()
