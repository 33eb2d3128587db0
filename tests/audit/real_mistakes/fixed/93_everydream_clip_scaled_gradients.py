# Fixed version of ../93_everydream_clip_scaled_gradients.py: silent on the codes that file expects.
import torch


def train(unet, optimizer, scaler, loader, clip_grad_norm, compute_loss):
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = compute_loss(unet, batch)
        scaler.scale(loss).backward()
        if clip_grad_norm is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(parameters=unet.parameters(), max_norm=clip_grad_norm)  # not: TB106
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
