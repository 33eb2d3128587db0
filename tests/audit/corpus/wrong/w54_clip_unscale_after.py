import torch


def step(model, optimizer, scaler, loss, max_norm=5.0):
    optimizer.zero_grad()
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), max_norm)  # expect: TB106
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
