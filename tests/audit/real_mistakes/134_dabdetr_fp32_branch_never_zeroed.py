# Reconstructed after IDEA-Research/DAB-DETR issue #58 ("optimizer.zero_grad()": it seems optimizer.zero_grad() is
# forgotten in train_one_epoch; the maintainer: "It can be viewed as a bug in our implementation"): the AMP branch of
# the update zeroed the gradients before its backward, the full-precision branch never did.
import math
import sys

import torch


def train_one_epoch(model, criterion, data_loader, optimizer, device, max_norm=0.0, amp=False):
    scaler = torch.cuda.amp.GradScaler(enabled=amp)
    model.train()
    criterion.train()
    for samples, targets in data_loader:
        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
        with torch.cuda.amp.autocast(enabled=amp):
            outputs = model(samples)
            loss_dict = criterion(outputs, targets)
            weight_dict = criterion.weight_dict
            losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict if k in weight_dict)
        loss_value = losses.item()
        if not math.isfinite(loss_value):
            sys.exit(1)
        if amp:
            optimizer.zero_grad()
            scaler.scale(losses).backward()
            if max_norm > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            losses.backward()
            if max_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()  # expect: TB104
