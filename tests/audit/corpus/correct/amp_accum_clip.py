"""AMP + gradient accumulation + clipping + EMA + per-update OneCycle + evaluation (correct)."""
import torch
import torch.nn.functional as F
from torch import nn

from trickbag import EMA


def train(model, train_loader, val_loader, epochs=3, accum_steps=4, max_norm=1.0):
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    total = epochs * len(train_loader) // accum_steps
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-4, total_steps=total)
    scaler = torch.amp.GradScaler("cuda")
    ema = EMA(model, decay=0.999)
    for epoch in range(epochs):
        model.train()
        running = 0.0
        optimizer.zero_grad(set_to_none=True)
        for step, (images, labels) in enumerate(train_loader):
            with torch.autocast("cuda", dtype=torch.float16):
                logits = model(images)
                loss = F.cross_entropy(logits, labels, label_smoothing=0.1)
                loss = loss / accum_steps
            scaler.scale(loss).backward()
            running += loss.item() * accum_steps
            if (step + 1) % accum_steps == 0:
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                ema.update(model)
        acc = evaluate(model, val_loader)
        print(epoch, running / len(train_loader), acc)


@torch.inference_mode()
def evaluate(model, loader):
    model.eval()
    correct = total = 0
    for images, labels in loader:
        preds = model(images).argmax(dim=1)
        correct += (preds == labels).sum().item()
        total += labels.numel()
    model.train()
    return correct / total
