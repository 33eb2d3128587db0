# Reconstructed after yastrebksv/TennisCourtDetector issue #7 ("Why there is no optimizer.zero_grad() in
# base_trainer.py?"; the maintainer: "You are right, thanks! I fixed it."): the heatmap trainer's train() stepped
# the optimizer after every backward without ever zeroing the gradients.
import torch.nn as nn


def train(model, train_loader, optimizer, device, epoch, max_iters):
    criterion = nn.MSELoss()
    model.train()
    losses = []
    for iter_id, batch in enumerate(train_loader):
        out = model(batch[0].float().to(device))
        gt_hm_hp = batch[1].float().to(device)
        loss = criterion(out, gt_hm_hp)
        loss.backward()
        optimizer.step()  # expect: TB104
        losses.append(loss.item())
        if iter_id > max_iters:
            break
    return sum(losses) / len(losses)
