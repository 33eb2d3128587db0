# Reconstructed after Azure/MS-AMP PR #45 ("[Bug Fixed] add `scaler.update()` in MNIST examples"): PR #36 left
# the MNIST example calling scaler.step(optimizer) without scaler.update(), which fails on the second step.
import torch
import torch.nn.functional as F


def train(model, device, train_loader, optimizer, epoch, log_interval):
    scaler = torch.amp.GradScaler("cuda")
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            output = model(data)
            loss = F.nll_loss(output, target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # expect: TB107
        if batch_idx % log_interval == 0:
            print(f"epoch {epoch} [{batch_idx * len(data)}] loss {loss.item():.6f}")
