import torch


def configure():
    torch.backends.cudnn.benchmarks = True  # expect: TB302
