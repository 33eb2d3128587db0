# TB404 save-whole-module: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import torch


def save_module(model, path):
    torch.save(model, path)  # expect: TB404


def save_weights(model, path):
    torch.save(model.state_dict(), path)


def save_checkpoint(model, optimizer, path):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
