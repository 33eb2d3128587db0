import copy

import torch


def get_param_groups(model, wd):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim == 1 else decay).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def train(model, loader, loss_fn, epochs=3, decay=0.999):
    ema = copy.deepcopy(model).eval()
    optimizer = torch.optim.AdamW(get_param_groups(model, 0.05), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 0.95 ** epoch)
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            with torch.no_grad():
                for p, ema_p in zip(model.parameters(), ema.parameters()):
                    ema_p.mul_(decay).add_(p, alpha=1 - decay)
        scheduler.step()
    return ema
