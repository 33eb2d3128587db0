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
