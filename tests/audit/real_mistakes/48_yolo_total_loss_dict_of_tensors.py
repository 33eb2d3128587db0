# Reconstructed after MultimediaTechLab/YOLO PR #83 ("[FIX] Fixes memory leak", merged): the trainer summed each
# named loss into a defaultdict of tensors, total_loss[name] += loss_val, keeping every batch's graph; the fix
# adds loss_val.item().
from collections import defaultdict


def train_one_epoch(model, loss_fn, optimizer, dataloader):
    total_loss = defaultdict(float)
    for images, targets in dataloader:
        optimizer.zero_grad()
        loss, loss_each = loss_fn(model(images), targets)
        loss.backward()
        optimizer.step()
        for loss_name, loss_val in loss_each.items():
            total_loss[loss_name] += loss_val  # expect: TB204
    return total_loss
