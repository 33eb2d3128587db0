"""Param groups built in lists and helpers, NLLs that take log_softmax (correct)."""
import torch
import torch.nn.functional as F
from torch import optim


def no_decay_groups(model):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") else decay).append(p)
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    groups.append(dict(params=model.head.parameters(), lr=1e-3, momentum=0.9))
    return optim.SGD(groups, lr=0.1)


def nll_of_picked(logits, y):
    logp = torch.log_softmax(logits, 1)
    return -logp.gather(1, y[:, None]).mean()


def nll_log_softmax(logits, y):
    logp = F.log_softmax(logits, 1)
    return -logp.gather(1, y[:, None]).mean()


def focal(logits, y, gamma=2.0):
    logpt = F.log_softmax(logits, 1).gather(1, y[:, None])
    pt = logpt.exp()
    return (-(1 - pt) ** gamma * logpt).mean()


def picked_log(logits, y):
    p = torch.softmax(logits, 1).gather(1, y[:, None])
    return -p.clamp_min(1e-12).log().mean()
