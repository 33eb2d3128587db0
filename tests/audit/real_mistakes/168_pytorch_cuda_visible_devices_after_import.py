# Reconstructed after pytorch/pytorch issue #9158 ("setting CUDA_VISIBLE_DEVICES just has no effect",
# https://github.com/pytorch/pytorch/issues/9158): the reporter's train.py imported torch and only then set
# os.environ['CUDA_VISIBLE_DEVICES'] = "2" inside the script, and training always ran on the first GPU, while
# `CUDA_VISIBLE_DEVICES=2 python train.py` worked.  The PyTorch maintainer (SsnL) answered "You need to do that
# before import pytorch"; the fix moves the assignment to the very top of the module, before `import torch`.
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

os.environ["CUDA_VISIBLE_DEVICES"] = "2"  # expect: TB402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def train(model, loader, optimizer, device, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % 100 == 0:
            print(f"epoch {epoch} batch {batch_idx} loss {loss.item():.4f}")


def main(loader):
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(1, args.epochs + 1):
        train(model, loader, optimizer, device, epoch)
