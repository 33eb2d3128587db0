# Reconstructed after NCAR/miles-credit PR #141 ("Gradscaler for grap clipping fix": "fixes gradscaler for grad
# clipping by unscaling the gradient before clipping", merged): the weather-model trainer clipped the scaled
# gradients of an AMP step.
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
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_max_norm)  # expect: TB106
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
