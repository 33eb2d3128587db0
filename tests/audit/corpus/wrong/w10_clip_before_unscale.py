import torch
from torch.cuda.amp import GradScaler, autocast


def train(model, loader, criterion, epochs=10, clip=1.0):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = GradScaler()
    for epoch in range(epochs):
        for images, targets in loader:
            optimizer.zero_grad()
            with autocast():
                loss = criterion(model(images), targets)
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)  # expect: TB106
            scaler.step(optimizer)
            scaler.update()
