# Reconstructed after speedinghzl/Pytorch-Deeplab issue #2 ("bug report": loss_calc computes log_softmax of the
# prediction, then CrossEntropy2d uses F.cross_entropy, which computes log_softmax again; the maintainer agreed and
# pointed to CrossEntropyLoss): the segmentation loss normalised the logits twice.
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
    log_prob = F.log_softmax(pred, dim=1)
    criterion = CrossEntropy2d()
    return criterion(log_prob, label)  # expect: TB303


def train(model, optimizer, loader):
    model.train()
    for images, labels in loader:
        optimizer.zero_grad()
        loss = loss_calc(model(images), labels)
        loss.backward()
        optimizer.step()
