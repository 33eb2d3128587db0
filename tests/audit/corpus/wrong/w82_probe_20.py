import torch

def train(model, loader, optimizer, loss_fn, epochs):
    scaler = torch.cuda.amp.GradScaler()
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            with torch.cuda.amp.autocast():
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)  # expect: TB107
