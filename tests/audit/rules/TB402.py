# TB402 cuda-visible-devices-late: fixture (read as text by tests/audit/test_rule_fixtures.py, never run).
# ruff: noqa  (wrong code on purpose, names left undefined)
import os

import torch


def too_late(gpu):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu  # expect: TB402
    return device


def in_time(gpu):
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    return "cuda" if torch.cuda.is_available() else "cpu"
