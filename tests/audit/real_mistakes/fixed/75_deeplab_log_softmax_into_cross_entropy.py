# Fixed version of ../75_deeplab_log_softmax_into_cross_entropy.py: silent on the codes that file expects.
import torch  # noqa: F401
import torch.nn as nn
import torch.nn.functional as F


class CrossEntropy2d(nn.Module):
    def __init__(self, ignore_label=255):
        super().__init__()
        self.ignore_label = ignore_label

    def forward(self, predict, target):
        return F.cross_entropy(predict, target, ignore_index=self.ignore_label)


def loss_calc(pred, label):
    criterion = CrossEntropy2d()
    return criterion(pred, label)  # not: TB303


def train(model, optimizer, loader):
    model.train()
    for images, labels in loader:
        optimizer.zero_grad()
        loss = loss_calc(model(images), labels)
        loss.backward()
        optimizer.step()
