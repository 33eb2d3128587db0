# Fixed version of ../46_mlp_validation_without_eval.py: silent on the codes that file expects.
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 10)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x):
        return self.fc2(self.dropout(torch.relu(self.fc1(x.view(-1, 784)))))


def train_fixed(model, criterion, optimizer, train_loader, valid_loader, n_epochs):
    for epoch in range(n_epochs):
        model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(data), target)
            loss.backward()
            optimizer.step()
        model.eval()
        valid_loss = 0.0
        for data, target in valid_loader:
            with torch.no_grad():
                output = model(data)  # not: TB201
            valid_loss += criterion(output, target).item() * data.size(0)
        print(epoch, valid_loss / len(valid_loader.sampler))
