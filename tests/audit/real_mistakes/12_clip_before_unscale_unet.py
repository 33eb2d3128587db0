# Reconstructed after milesial/Pytorch-UNet issue #468 ("Gradients are clipped before the unscaling"), fixed by
# PR #470: train.py clipped the scaled gradients; the fix calls grad_scaler.unscale_(optimizer) first.
import torch


def train_epoch(model, train_loader, optimizer, criterion, device, amp, gradient_clipping=1.0):
    grad_scaler = torch.amp.GradScaler("cuda", enabled=amp)
    model.train()
    for batch in train_loader:
        images, true_masks = batch["image"].to(device), batch["mask"].to(device)
        with torch.autocast(device.type, enabled=amp):
            masks_pred = model(images)
            loss = criterion(masks_pred, true_masks)
        optimizer.zero_grad(set_to_none=True)
        grad_scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)  # expect: TB106
        grad_scaler.step(optimizer)
        grad_scaler.update()
