import os
import subprocess

import torch
import torch.nn as nn
import torch.nn.functional as F


def least_used_gpu():
    out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False)
    usage = [int(v) for v in out.stdout.split()] or [0]
    return usage.index(min(usage))


def configure():
    os.environ["CUDA_VISIBLE_DEVICES"] = str(least_used_gpu())
    torch.cuda.set_device(0)


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


def fit(model, loader, opt, criterion=nn.BCELoss(), accum=2):
    model.train()
    history = []
    for i, (xs, y) in enumerate(loader):
        parts = [criterion(model(x), y) for x in xs]
        losses = sum(parts) / accum
        losses.backward()
        history.append(F.binary_cross_entropy(model(xs[0]), y).item())
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
    return history


class Runner:
    def __init__(self, model, lr=3e-4):
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def update(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss.detach()

    def epoch(self, loader):
        self.model.train()
        return torch.stack([self.update(x, y) for x, y in loader]).mean()

    @torch.no_grad()
    def evaluate(self, loader):
        self.model.eval()
        return sum(F.mse_loss(self.model(x), y).item() for x, y in loader)
