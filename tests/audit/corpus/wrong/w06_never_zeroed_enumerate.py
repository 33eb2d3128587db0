import torch
from torch import nn


def train(model: nn.Module, loader, epochs: int = 5):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
            optimizer.step()  # expect: TB104
            if step % 100 == 0:
                print(epoch, step, loss.item())
