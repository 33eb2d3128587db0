# Fixed version of ../169_pytorch_alloc_conf_after_import.py: silent on the codes that file expects.
import os

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"  # not: TB???

import torch
import torch.nn as nn


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
