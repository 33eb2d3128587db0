# TB403 torch-load-unsafe: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import sys

import torch


def resume(args):
    return torch.load(args.resume, map_location="cpu", weights_only=False)  # expect: TB403


def from_command_line():
    return torch.load(sys.argv[1], weights_only=False)  # expect: TB403


RUN_DIR = "runs/last"


def own_checkpoint():
    return torch.load(f"{RUN_DIR}/last.pt", weights_only=False)  # expect-low: TB403


def load_pretrained(checkpoint_dir):  # an API: the caller's directory, not shown to come from outside
    return torch.load(checkpoint_dir / "model.pth", weights_only=False)  # expect-low: TB403


def no_argument(path):
    return torch.load(path)  # expect-low: TB403 (a parameter: nothing shows the file comes from outside)


def no_argument_from_the_command_line(args):
    return torch.load(args.weights)  # expect: TB403 (trickbag's pyproject.toml allows torch 2.4, older than 2.6)


def safe(path):
    return torch.load(path, weights_only=True)
