import torch
import torch.nn.functional as F


def train(model, train_loader, val_loader, optimizer, epochs=10):
    model.train()
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        model.eval()  # expect: TB202
        with torch.no_grad():
            acc = sum((model(x).argmax(1) == y).float().mean().item() for x, y in val_loader)
        print(epoch, acc / len(val_loader))
