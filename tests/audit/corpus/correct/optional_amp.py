"""AMP optional at run time: the scaler path and the plain path in two branches (correct)."""
import torch


def train(model, loader, criterion, optimizer, use_amp=True, clip=1.0):
    scaler = torch.amp.GradScaler("cuda") if use_amp else None
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", enabled=use_amp):
            loss = criterion(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()


def accumulate_zero_first(model, loader, criterion, optimizer, k=4):
    for i, (x, y) in enumerate(loader):
        if i % k == 0:
            optimizer.zero_grad()
        (criterion(model(x), y) / k).backward()
        if (i + 1) % k == 0:
            optimizer.step()
