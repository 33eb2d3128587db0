import torch


def train(model, loader, loss_fn, optimizer, grad_accum_steps=4, max_grad_norm=1.0):
    model.train()
    for idx, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / grad_accum_steps
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)  # expect: TB109
        if (idx + 1) % grad_accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
