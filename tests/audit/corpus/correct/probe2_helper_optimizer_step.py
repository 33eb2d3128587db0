"""A local optimizer_step() helper is followed, not taken for a bare step by its name (correct)."""
import torch.nn.functional as F


def optimizer_step(optimizer):
    optimizer.step()
    optimizer.zero_grad()


def train(model, loader, optimizer):
    model.train()
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer_step(optimizer)
