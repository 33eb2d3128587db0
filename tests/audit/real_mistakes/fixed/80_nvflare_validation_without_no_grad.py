# Fixed version of ../80_nvflare_validation_without_no_grad.py: silent on the codes that file expects.
import torch


def validate(model, val_loader, device):
    model.eval()
    correct, total = 0, 0
    for images, labels in val_loader:
        images, labels = images.to(device), labels.to(device)
        with torch.no_grad():
            outputs = model(images)  # not: TB203
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()
    return correct / total


def train(model, optimizer, loss_fn, train_loader, val_loader, device, epochs):
    for _ in range(epochs):
        model.train()
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = loss_fn(model(images.to(device)), labels.to(device))
            loss.backward()
            optimizer.step()
        print(validate(model, val_loader, device))
