import os
import torch

x = torch.zeros(10, device="cuda")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "2")  # expect: TB402
