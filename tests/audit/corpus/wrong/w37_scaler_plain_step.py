import torch


def train(model, loader, criterion, optimizer):
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        optimizer.step()  # expect: TB112
        scaler.update()
