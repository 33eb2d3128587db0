# Reconstructed after NaJaeMin92/pytorch-DANN issue #7 ("Regarding softmax layer": "The softmax layer makes models
# hard to train"; the maintainer: "Since LogSoftmax is already included in nn.CrossEntropyLoss, it is redundant.
# Please check the updated code"): the label classifier and the domain discriminator ended in nn.Softmax and were
# trained with CrossEntropyLoss.
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Sequential(
            nn.Linear(2048, 512), nn.ReLU(), nn.Linear(512, 10), nn.Softmax(dim=1))

    def forward(self, h):
        return self.layer(h)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Sequential(
            nn.Linear(2048, 512), nn.ReLU(), nn.Linear(512, 2), nn.Softmax(dim=1))

    def forward(self, h, alpha):
        return self.layer(h)


def train_dann(encoder, classifier, discriminator, source_loader, target_loader, optimizer, alpha):
    class_criterion = nn.CrossEntropyLoss()
    domain_criterion = nn.CrossEntropyLoss()
    for (xs, ys), (xt, _) in zip(source_loader, target_loader):
        optimizer.zero_grad()
        hs, ht = encoder(xs), encoder(xt)
        class_pred = classifier(hs)
        class_loss = class_criterion(class_pred, ys)  # expect: TB303
        domain_pred = discriminator(torch.cat([hs, ht]), alpha)
        domain_y = torch.cat([torch.zeros(len(xs)), torch.ones(len(xt))]).long()
        domain_loss = domain_criterion(domain_pred, domain_y)  # expect: TB303
        (class_loss + domain_loss).backward()
        optimizer.step()
