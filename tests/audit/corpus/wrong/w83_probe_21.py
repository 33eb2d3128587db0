import torch


def validate(model, val_loader, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in val_loader:
            total += criterion(model(x), y).item()
    return total


def train(model, train_loader, val_loader, optimizer, criterion, epochs=10):
    model.train()
    for epoch in range(epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        validate(model, val_loader, criterion)  # expect: TB202
