import torch


def make_optimizer(model, base_lr=1e-3):
    head_params = list(model.head.parameters())
    return torch.optim.SGD(
        [
            {"params": model.backbone.parameters(), "lr": base_lr * 0.1},
            {"model": head_params, "lr": base_lr},  # expect: TB301
        ],
        momentum=0.9,
    )
