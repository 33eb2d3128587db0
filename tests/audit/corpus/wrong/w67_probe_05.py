import torch

def train(model, loaders, optimizer, criterion, epochs=20, val_every=2):
    for epoch in range(epochs):
        model.train()
        for x, y in loaders["train"]:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        if epoch % val_every == 0:
            with torch.no_grad():
                correct = 0
                for x, y in loaders["val"]:
                    correct += (model(x).argmax(-1) == y).sum().item()  # expect: TB201
            print(correct)
