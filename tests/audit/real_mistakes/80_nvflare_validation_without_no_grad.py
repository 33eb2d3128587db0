# Reconstructed after NVIDIA/NVFlare PR #3071 ("Add no_grad to validation steps ... to reduce GPU memory
# consumption", fixes #3067, merged; #2443 reported the out-of-memory error in _validate()): the example's
# validation ran the model's forward passes with gradients enabled.
import torch


def validate(model, val_loader, device):
    model.eval()
    correct, total = 0, 0
    for images, labels in val_loader:
        images, labels = images.to(device), labels.to(device)
        outputs = model(images)  # expect: TB203
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
