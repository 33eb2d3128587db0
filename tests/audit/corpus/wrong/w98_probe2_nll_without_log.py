import torch
import torch.nn.functional as F


def nll_one_line(logits, y):
    return -F.softmax(logits, dim=1).gather(1, y.unsqueeze(1)).mean()  # expect: TB303


def nll_indexed(logits, y):
    p = torch.softmax(logits, 1)
    return -p[torch.arange(len(y)), y].mean()  # expect: TB303


def nll_take_along(logits, y):
    probs = logits.softmax(dim=-1)
    picked = torch.take_along_dim(probs, y[:, None], dim=1)
    loss = torch.mean(-picked)  # expect: TB303
    return loss
