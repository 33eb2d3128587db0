import torch


def build(encoder, decoder):
    groups = []
    groups.append({"parameters": encoder.parameters(), "lr": 1e-4, "weight_decay": 0.01})  # expect: TB301
    groups.append({"params": decoder.parameters(), "lr": 1e-3})
    return torch.optim.AdamW(groups)
