# Reconstructed after danielkelshaw/ConcreteDropout issue #11 ("is softmax required?": the model passes the logits
# through softmax in the output layer, but then F.cross_entropy() is used, which combines log_softmax and nll; the
# maintainer: "Thanks @as595 for pointing this out, I'll fix it", fixed by PR #12): the MNIST example's network
# returned softmax probabilities and train() fed them to F.cross_entropy.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 10)
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        x = x.view(-1, 784)
        x = self.drop(F.relu(self.fc1(x)))
        x = self.drop(F.relu(self.fc2(x)))
        return F.softmax(self.fc3(x), dim=1)


def train(model, optimizer, loader, reg_weight):
    model.train()
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        reg = sum(p.pow(2).sum() for p in model.parameters())
        loss = F.cross_entropy(output, target) + reg_weight * reg  # expect: TB303
        loss.backward()
        optimizer.step()


def main(loader, epochs):
    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        train(model, optimizer, loader, 1e-6)
