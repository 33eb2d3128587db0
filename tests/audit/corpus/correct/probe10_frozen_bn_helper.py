"""Fine-tuning a detector backbone with its BatchNorm layers frozen by a helper after ``train()``."""
import torch
from torch import nn


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU())
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.backbone(x).mean((2, 3)))


def keep_norm_layers_frozen(network):
    for _, child in network.backbone.named_children():
        if isinstance(child, nn.BatchNorm2d):
            child.eval()
            child.weight.requires_grad_(False)
            child.bias.requires_grad_(False)


def run(loader, epochs=3):
    detector = Detector()
    optimizer = torch.optim.SGD([p for p in detector.parameters() if p.requires_grad], lr=0.01)
    for _ in range(epochs):
        detector.train()
        keep_norm_layers_frozen(detector)
        for images, boxes in loader:
            loss = nn.functional.smooth_l1_loss(detector(images), boxes)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return detector
