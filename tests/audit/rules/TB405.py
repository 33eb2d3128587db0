# TB405 benchmark-with-determinism: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch


def seed_everything(seed, deterministic):
    torch.manual_seed(seed)
    if deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    else:
        torch.backends.cudnn.benchmark = True  # exclusive with the deterministic branch


def fast_and_reproducible():
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True  # expect: TB405
