import torch

def train(model, loader, optimizer, criterion, ema_model, n_accum=4):
    for it, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / n_accum
        loss.backward()
        if it % n_accum == n_accum - 1:
            optimizer.step()
            optimizer.zero_grad()
        ema_model.update_parameters(model)  # expect: TB108
