import torch


def optimizer_for(model):
    return torch.optim.Adam([
        {"params": model.encoder.parameters(), "learning_rate": 1e-5},  # expect: TB301
        {"params": model.decoder.parameters()},
    ], lr=1e-3)
