# Fixed version of ../59_court_detector_trainer_never_zeroed.py: silent on the codes that file expects.
import torch.nn as nn


def train(model, train_loader, optimizer, device, epoch, max_iters):
    criterion = nn.MSELoss()
    model.train()
    losses = []
    for iter_id, batch in enumerate(train_loader):
        optimizer.zero_grad()
        out = model(batch[0].float().to(device))
        gt_hm_hp = batch[1].float().to(device)
        loss = criterion(out, gt_hm_hp)
        loss.backward()
        optimizer.step()  # not: TB104
        losses.append(loss.item())
        if iter_id > max_iters:
            break
    return sum(losses) / len(losses)
