import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in, n_classes):
        super().__init__()
        self.fc1 = nn.Linear(d_in, 128)
        self.fc2 = nn.Linear(128, n_classes)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        return torch.softmax(self.fc2(x), dim=-1)


def train(loader, d_in=20, n_classes=3):
    mlp = MLP(d_in, n_classes)
    loss_func = nn.CrossEntropyLoss()
    optim = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    for x, y in loader:
        optim.zero_grad()
        preds = mlp(x)
        loss = loss_func(preds, y)  # expect: TB303
        loss.backward()
        optim.step()
