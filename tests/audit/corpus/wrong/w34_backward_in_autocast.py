import torch


def train(model, loader, optimizer, criterion):
    scaler = torch.amp.GradScaler("cuda")
    for src, tgt in loader:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            pred = model(src)
            loss = criterion(pred, tgt)
            scaler.scale(loss).backward()  # expect: TB110
        scaler.step(optimizer)
        scaler.update()
