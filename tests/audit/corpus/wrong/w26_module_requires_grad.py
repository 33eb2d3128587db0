from torch import nn


def freeze_encoder(model: nn.Module):
    for child_name, child in model.named_children():
        if child_name != "classifier":
            child.requires_grad = False  # expect: TB302
    return model
