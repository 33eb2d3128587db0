import os
import torch

os.environ["CUDA_VISIBLE_DEVICE"] = "1"  # expect: TB401
os.environ["PYTORCH_CUDA_ALLOC_CONFIG"] = "expandable_segments:True"  # expect: TB401


def world():
    return int(os.envion.get("WORLD_SIZE", 1))  # expect: TB401
