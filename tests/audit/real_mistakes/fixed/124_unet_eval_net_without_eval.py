# Fixed version of ../124_unet_eval_net_without_eval.py: silent on the codes that file expects.
import torch
import torch.nn as nn


def dice_coeff(pred, target):
    inter = (pred * target).sum()
    return (2 * inter + 1e-4) / (pred.sum() + target.sum() + 1e-4)


def eval_net(net, dataset):
    net.eval()
    tot = 0.0
    for i, (img, true_mask) in enumerate(dataset):  # noqa: B007
        with torch.no_grad():
            mask_pred = net(img.unsqueeze(0))[0]  # not: TB201
        mask_pred = (torch.sigmoid(mask_pred) > 0.5).float()
        tot += dice_coeff(mask_pred, true_mask).item()
    net.train()
    return tot / (i + 1)


def train_net(net, train_loader, val_dataset, epochs, lr):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=0.0005)
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(epochs):
        net.train()
        for imgs, true_masks in train_loader:
            masks_pred = net(imgs)
            loss = criterion(masks_pred, true_masks)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        val_dice = eval_net(net, val_dataset)
        print(f"epoch {epoch}: validation Dice {val_dice:.4f}")
