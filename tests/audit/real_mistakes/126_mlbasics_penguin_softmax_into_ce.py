# Reconstructed after MicrosoftDocs/ml-basics issue #48 ("The torch deep learning model should not use softmax last
# layer + CrossEntropyLoss": torch CrossEntropyLoss expects logits instead of normalized probabilities; the
# maintainer: "Thanks - fixed"): the penguin classifier's forward ended in torch.softmax and the training function
# fed its output to nn.CrossEntropyLoss.
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
        x = torch.softmax(self.fc3(x), dim=1)
        return x


def train(model, data_loader, optimizer, loss_criteria):
    model.train()
    train_loss = 0.0
    for data, target in data_loader:
        optimizer.zero_grad()
        out = model(data)
        loss = loss_criteria(out, target)  # expect: TB303
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
