# TB303 softmax-into-log-loss: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
import torch.nn.functional as F


def ce_on_probabilities(logits, targets):
    probs = F.softmax(logits, dim=1)
    return F.cross_entropy(probs, targets)  # expect: TB303


def ce_on_logits(logits, targets):
    return F.cross_entropy(logits, targets)


def nll_on_log_probabilities(logits, targets):
    return F.nll_loss(F.log_softmax(logits, dim=1), targets)


def nll_on_probabilities(logits, targets):
    return F.nll_loss(F.softmax(logits, dim=1), targets)  # expect: TB303


def entropy_bonus(logits):
    p = F.softmax(logits, dim=-1)
    return -(p * p.log()).sum(-1).mean()


def matching_cost(out_prob, tgt_ids):
    return -out_prob[:, tgt_ids]  # a matching cost (DETR), not a loss of the batch


def clamped_log(probs, targets):
    return -(targets * torch.log(probs + 1e-8)).sum(-1).mean()
