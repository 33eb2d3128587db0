import sys

import torch

def restore(model):
    ckpt_path = sys.argv[1]
    model.load_state_dict(torch.load(ckpt_path)["model"])  # expect: TB403
