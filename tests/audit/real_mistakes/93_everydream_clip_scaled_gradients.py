# Reconstructed after victorchall/EveryDream2trainer PR #175 ("correctly apply clip_grad_scale to unscaled
# gradients", merged: with AMP the clip was applied to the scaled gradients, so the usual 1.0 effectively halted
# training): the trainer clipped right after the scaled backward, before the GradScaler unscaled anything.
import torch


def train(unet, optimizer, scaler, loader, clip_grad_norm, compute_loss):
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = compute_loss(unet, batch)
        scaler.scale(loss).backward()
        if clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(parameters=unet.parameters(), max_norm=clip_grad_norm)  # expect: TB106
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
