"""Set-up code done right: env before CUDA, safe loading, param groups, freezing, determinism (correct)."""
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "0"
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
from torch import nn  # noqa: E402

torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.use_deterministic_algorithms(True)


def configure(fast: bool):
    if fast:
        torch.backends.cudnn.benchmark = True
    else:
        torch.backends.cudnn.deterministic = True


def build(model: nn.Module, path: str):
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    for p in model.backbone.parameters():
        p.requires_grad = False
    model.backbone.requires_grad_(False)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": 0.05},
        {"params": no_decay, "weight_decay": 0.0, "lr": 1e-3},
    ]
    optimizer = torch.optim.AdamW(groups, lr=1e-3)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return optimizer, device, os.environ.get("LOCAL_RANK", "0")
