# Reconstructed after WenmuZhou/PSENet.pytorch PR #93 (merged; the maintainer asked to step the scheduler after each
# epoch, for torch >= 1.1): train_epoch() stepped the MultiStepLR scheduler at its start, before any optimizer step.
import torch


def train_epoch(net, optimizer, scheduler, train_loader, device, criterion):
    net.train()
    train_loss = 0.0
    scheduler.step()  # expect: TB101
    lr = scheduler.get_last_lr()[0]
    for images, labels, training_mask in train_loader:
        images, labels = images.to(device), labels.to(device)
        y1 = net(images)
        loss_c, loss_s, loss = criterion(y1, labels, training_mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
    return train_loss / len(train_loader), lr


def main(net, train_loader, device, criterion, epochs):
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [200, 400], gamma=0.1)
    for _epoch in range(epochs):
        train_epoch(net, optimizer, scheduler, train_loader, device, criterion)
