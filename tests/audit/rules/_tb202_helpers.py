# Helper module of TB202.py (a project module its training loop imports); read as text, never run.
# ruff: noqa  (names left undefined)
import torch


def evaluate_eval_only(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(loss_fn(model(x), y).item() for x, y in loader)


def evaluate_and_back(model, loader):
    model.eval()
    with torch.no_grad():
        total = sum(loss_fn(model(x), y).item() for x, y in loader)
    model.train()
    return total
