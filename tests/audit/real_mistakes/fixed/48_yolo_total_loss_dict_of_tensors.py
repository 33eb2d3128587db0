# Fixed version of ../48_yolo_total_loss_dict_of_tensors.py: silent on the codes that file expects.
from collections import defaultdict


def train_one_epoch_fixed(model, loss_fn, optimizer, dataloader):
    sums = defaultdict(float)
    for images, targets in dataloader:
        optimizer.zero_grad()
        loss, loss_each = loss_fn(model(images), targets)
        loss.backward()
        optimizer.step()
        for loss_name, loss_val in loss_each.items():
            sums[loss_name] += loss_val.item()  # not: TB204
    return sums
