import torch


def configure_optimizers(model):
    no_decay = [p for n, p in model.named_parameters() if "bias" in n]
    decay = [p for n, p in model.named_parameters() if "bias" not in n]
    return torch.optim.AdamW([
        {"params": decay, "weight_decay": 0.01},
        {"param": no_decay, "weight_decay": 0.0},  # expect: TB301
    ], lr=5e-5)
