# Reconstructed after jindongwang/Deep-learning-activity-recognition issue #10 ("Bug in code"): the network's
# forward ended in F.softmax and the training loop applied nn.CrossEntropyLoss to its output.
import torch
import torch.nn.functional as F
from torch import nn


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(9, 32, kernel_size=(1, 9))
        self.pool = nn.MaxPool2d(kernel_size=(1, 2), stride=2)
        self.fc1 = nn.Linear(32 * 60, 1000)
        self.fc2 = nn.Linear(1000, 6)

    def forward(self, x):
        out = self.pool(F.relu(self.conv1(x)))
        out = out.reshape(-1, 32 * 60)
        out = F.dropout(F.relu(self.fc1(out)), training=self.training)
        return F.softmax(self.fc2(out), dim=1)


def train(train_loader, epochs, lr):
    model = Network()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for _e in range(epochs):
        model.train()
        for sample, target in train_loader:
            output = model(sample)
            loss = criterion(output, target)  # expect: TB303
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
