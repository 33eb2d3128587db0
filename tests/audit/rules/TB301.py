# TB301 param-group-key: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch
from timm.optim import Lamb


class Adan(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.98, 0.92, 0.99), epsilon=1e-8, beta3=0.99):
        super().__init__(params, dict(lr=lr, betas=betas, epsilon=epsilon, beta3=beta3))


def torch_optimizer(model):
    return torch.optim.AdamW([
        {"params": model.backbone.parameters(), "learning_rate": 1e-4},  # expect: TB301
        {"parameters": model.head.parameters(), "lr": 1e-3},  # expect: TB301
    ])


def own_optimizer(model):  # its own hyper-parameter names: not typos
    return Adan([{"params": model.parameters(), "epsilon": 1e-6, "beta3": 0.9}])


def other_package(model):
    return Lamb([{"params": model.parameters(), "epsilon": 1e-6}])


# A custom key that the same file reads back (SimSiam's fixed-lr predictor) is the program's own, not a typo;
# the same key never read back is ignored by torch.optim.
def fixed_lr_groups(model):
    return torch.optim.SGD([
        {"params": model.encoder.parameters(), "fix_lr": False},
        {"params": model.predictor.parameters(), "fix_lr": True},
    ], lr=0.05)


def adjust_learning_rate(optimizer, lr):
    for param_group in optimizer.param_groups:
        if "fix_lr" in param_group and param_group["fix_lr"]:
            param_group["lr"] = 0.05
        else:
            param_group["lr"] = lr


def never_read_back(model):
    return torch.optim.SGD([{"params": model.parameters(), "min_lrr": 1e-5}], lr=0.05)  # expect: TB301
