# Reconstructed after Abe404/segmentation_of_roots_in_soil_with_unet PR #4 ("Fix off-by-one error in scheduler use",
# merged: "Apparently scheduler should be used only after at least a step of the optimizer"): the epoch function
# stepped the learning-rate scheduler at its start, before any optimizer.step() of the epoch.
import torch


def train_epoch(net, train_loader, optimizer, scheduler, criterion, device):
    scheduler.step()  # expect: TB101
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
    return epoch_loss / len(train_loader)


def train(net, train_loader, epochs, lr):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.99)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.3)
    criterion = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        train_epoch(net, train_loader, optimizer, scheduler, criterion, "cuda")
