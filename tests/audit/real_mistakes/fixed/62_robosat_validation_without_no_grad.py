# Fixed version of ../62_robosat_validation_without_no_grad.py: silent on the codes that file expects.
import torch


@torch.no_grad()
def validate(loader, num_classes, device, net, criterion):
    net.eval()
    running_loss = 0.0
    for images, masks, tiles in loader:  # noqa: B007
        images = images.to(device)
        masks = masks.to(device)
        outputs = net(images)  # not: TB203
        loss = criterion(outputs, masks)
        running_loss += loss.item()
    return running_loss / len(loader)


def train(loader, num_classes, device, net, optimizer, criterion):
    net.train()
    for images, masks, tiles in loader:  # noqa: B007
        optimizer.zero_grad()
        loss = criterion(net(images.to(device)), masks.to(device))
        loss.backward()
        optimizer.step()
