# Reconstructed after TorchSSL/TorchSSL PR #59 ("fix bug in gradient clipping": "In automatic mixed precision, we
# should unscale all gradients before clip them", merged): the semi-supervised trainers clipped the still-scaled
# gradients under AMP, so the clip threshold applied to gradients multiplied by the loss scale.
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
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)  # expect: TB106
            scaler.step(optimizer)
            scaler.update()
        else:
            total_loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
        scheduler.step()
        model.zero_grad()
