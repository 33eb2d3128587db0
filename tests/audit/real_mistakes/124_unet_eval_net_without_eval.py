# Reconstructed after milesial/Pytorch-UNet issue #31 ("Switch net.train() to net.eval() during evaluation?": the
# U-Net uses BatchNorm2d and eval_net() never switched modes; the maintainer: "You're right, I'm fixing it right
# now"): the Dice evaluation run after every training epoch left the network in train mode.
import torch
import torch.nn as nn


def dice_coeff(pred, target):
    inter = (pred * target).sum()
    return (2 * inter + 1e-4) / (pred.sum() + target.sum() + 1e-4)


def eval_net(net, dataset):
    tot = 0.0
    for i, (img, true_mask) in enumerate(dataset):  # noqa: B007
        with torch.no_grad():
            mask_pred = net(img.unsqueeze(0))[0]  # expect: TB201
        mask_pred = (torch.sigmoid(mask_pred) > 0.5).float()
        tot += dice_coeff(mask_pred, true_mask).item()
    return tot / (i + 1)


def train_net(net, train_loader, val_dataset, epochs, lr):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=0.0005)
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(epochs):
        for imgs, true_masks in train_loader:
            masks_pred = net(imgs)
            loss = criterion(masks_pred, true_masks)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        val_dice = eval_net(net, val_dataset)
        print(f"epoch {epoch}: validation Dice {val_dice:.4f}")
