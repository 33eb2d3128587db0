import torch
from torch import nn


def load_pretrained(model: nn.Module, url: str):
    path = torch.hub.download_url_to_file(url, "pretrained.pth")
    checkpoint = torch.load(path, map_location="cpu")  # expect: TB403
    model.load_state_dict(checkpoint["state_dict"])
    return model


def export(model: nn.Module, path: str):
    torch.save(model, path)  # expect: TB404
