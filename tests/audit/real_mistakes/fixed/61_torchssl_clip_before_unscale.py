# Fixed version of ../61_torchssl_clip_before_unscale.py: silent on the codes that file expects.
import torch
from torch.cuda.amp import GradScaler, autocast


def train(model, optimizer, scheduler, loader, compute_loss, clip, use_amp):
    scaler = GradScaler()
    for x_lb, y_lb, x_ulb_w, x_ulb_s in loader:
        with autocast(enabled=use_amp):
            total_loss = compute_loss(model, x_lb, y_lb, x_ulb_w, x_ulb_s)
        if use_amp:
            scaler.scale(total_loss).backward()
            if clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)  # not: TB106
            scaler.step(optimizer)
            scaler.update()
        else:
            total_loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
        scheduler.step()
        model.zero_grad()
