# Fixed version of ../126_mlbasics_penguin_softmax_into_ce.py: silent on the codes that file expects.
import torch
import torch.nn as nn


class PenguinNet(nn.Module):
    def __init__(self, n_features, hl, n_classes):
        super().__init__()
        self.fc1 = nn.Linear(n_features, hl)
        self.fc2 = nn.Linear(hl, hl)
        self.fc3 = nn.Linear(hl, n_classes)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def train(model, data_loader, optimizer, loss_criteria):
    model.train()
    train_loss = 0.0
    for data, target in data_loader:
        optimizer.zero_grad()
        out = model(data)
        loss = loss_criteria(out, target)  # not: TB303
        train_loss += loss.item()
        loss.backward()
        optimizer.step()
    return train_loss / len(data_loader)


def main(train_loader, n_features, n_classes, epochs):
    model = PenguinNet(n_features, 10, n_classes)
    loss_criteria = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    for _ in range(epochs):
        train(model, train_loader, optimizer, loss_criteria)
