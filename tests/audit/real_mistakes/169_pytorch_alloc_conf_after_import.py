# Reconstructed after pytorch/pytorch issue #104801 ('INTERNAL ASSERT FAILED at
# "../c10/cuda/CUDACachingAllocator.cpp":644, please report a bug to PyTorch',
# https://github.com/pytorch/pytorch/issues/104801): the script imported torch and afterwards set
# os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"; the first CUDA allocation then failed with
# "Allocator backend parsed at runtime != allocator backend parsed at load time".  The maintainer (ptrblck) replied
# "You are most likely setting the config too late, i.e. after importing `torch`" and showed the working order:
# set the variable before `import torch` (or export it in the shell).  Same family as TB402, but for the allocator
# config rather than CUDA_VISIBLE_DEVICES.
import os

import torch
import torch.nn as nn

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"  # expect: TB???


def build_model():
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))


def train(steps=100, batch_size=64):
    device = torch.device("cuda")
    model = build_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.MSELoss()
    model.train()
    for step in range(steps):
        x = torch.randn(batch_size, 1024, device=device)
        y = torch.randn(batch_size, 1024, device=device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} "
                  f"reserved {torch.cuda.memory_reserved() / 2**20:.0f} MiB")


if __name__ == "__main__":
    train()
