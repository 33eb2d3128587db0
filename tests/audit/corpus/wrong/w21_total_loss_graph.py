import torch


def train_epoch(model, loader, optimizer, loss_fn):
    model.train()
    epoch_loss = 0
    for batch_idx, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        out = model(x)
        loss = loss_fn(out, y)
        loss.backward()
        optimizer.step()
        epoch_loss += loss  # expect: TB204
    return epoch_loss / len(loader)
