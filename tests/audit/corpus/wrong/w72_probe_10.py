import torch

def restore(model, ckpt_path):
    model.load_state_dict(torch.load(ckpt_path)["model"])  # expect: TB403
