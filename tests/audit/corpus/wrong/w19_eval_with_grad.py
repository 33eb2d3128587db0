import torch


def validation_epoch(model, loader, criterion, device):
    model.eval()
    losses = []
    for batch in loader:
        inputs = batch["input"].to(device)
        targets = batch["target"].to(device)
        preds = model(inputs)  # expect: TB203
        losses.append(criterion(preds, targets).item())
    model.train()
    return sum(losses) / len(losses)
