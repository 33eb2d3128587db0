import torch


def train(model, stream, loss_fn, max_steps):
    optimizer = torch.optim.AdamW(model.parameters())
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=500)
    step = 0
    while step < max_steps:
        x, y = next(stream)
        warmup.step()  # expect: TB101
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        step += 1
