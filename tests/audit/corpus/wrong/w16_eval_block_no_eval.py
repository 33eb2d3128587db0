import torch
import torch.nn.functional as F


def train(model, train_loader, val_loader, optimizer, epochs=10):
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        val_loss = 0.0
        with torch.inference_mode():
            for x, y in val_loader:
                val_loss += F.cross_entropy(model(x), y).item()  # expect: TB201
        print(epoch, val_loss)
