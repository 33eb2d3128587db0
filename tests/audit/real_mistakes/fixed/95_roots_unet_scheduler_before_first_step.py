# Fixed version of ../95_roots_unet_scheduler_before_first_step.py: silent on the codes that file expects.
import torch


def train_epoch(net, train_loader, optimizer, scheduler, criterion, device):
    net.train()
    epoch_loss = 0.0
    for photo_tiles, foreground_tiles in train_loader:
        photo_tiles = photo_tiles.to(device)
        foreground_tiles = foreground_tiles.to(device)
        optimizer.zero_grad()
        outputs = net(photo_tiles)
        loss = criterion(outputs, foreground_tiles)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
    scheduler.step()  # not: TB101
    return epoch_loss / len(train_loader)


def train(net, train_loader, epochs, lr):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.99)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.3)
    criterion = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        train_epoch(net, train_loader, optimizer, scheduler, criterion, "cuda")
