# Fixed version of ../72_credit_clip_without_unscale.py: silent on the codes that file expects.
import torch
from torch.cuda.amp import GradScaler, autocast


def train_one_epoch(model, optimizer, loader, criterion, grad_max_norm, amp):
    scaler = GradScaler(enabled=amp)
    for batch in loader:
        with autocast(enabled=amp):
            y_pred = model(batch["x"])
            loss = criterion(y_pred, batch["y"])
        scaler.scale(loss).backward()
        if grad_max_norm > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_max_norm)  # not: TB106
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
