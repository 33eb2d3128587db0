import torch

def train(model, loader, criterion, optimizer, scheduler, scaler, accumulation_steps=2):
    model.train()
    for i, (inputs, labels) in enumerate(loader):
        with torch.autocast("cuda"):
            loss = criterion(model(inputs), labels) / accumulation_steps
        scaler.scale(loss).backward()
        if (i + 1) % accumulation_steps == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # expect: TB106
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
        scheduler.step()  # expect: TB102
