# Reconstructed after mapbox/robosat PR #109 ("Added torch.no_grad()": "prevents possible 'out of memory' errors
# during validation"; the maintainer: "Ouch, good catch!", merged): the segmentation trainer's validate() put the
# net in eval mode but ran every validation batch with gradients enabled.
import torch  # noqa: F401


def validate(loader, num_classes, device, net, criterion):
    net.eval()
    running_loss = 0.0
    for images, masks, tiles in loader:  # noqa: B007
        images = images.to(device)
        masks = masks.to(device)
        outputs = net(images)  # expect: TB203
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
