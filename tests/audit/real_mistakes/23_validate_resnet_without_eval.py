# Reconstructed after deep-learning-with-pytorch/dlwpt-code issue #104 ("Didn't set model to eval mode when
# validating in chapter 8"): the validate() of the BatchNorm ResNet measured accuracy without model.eval().
import torch


def training_loop(n_epochs, optimizer, model, loss_fn, train_loader):
    for _epoch in range(1, n_epochs + 1):
        for imgs, labels in train_loader:
            outputs = model(imgs)
            loss = loss_fn(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def validate(model, train_loader, val_loader):
    accdict = {}
    for name, loader in [("train", train_loader), ("val", val_loader)]:
        correct = 0
        total = 0
        with torch.no_grad():
            for imgs, labels in loader:
                outputs = model(imgs)  # expect: TB201
                _, predicted = torch.max(outputs, dim=1)
                total += labels.shape[0]
                correct += int((predicted == labels).sum())
        accdict[name] = correct / total
    return accdict
