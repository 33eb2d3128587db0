import os

import torch


class Checkpointer:
    def __init__(self, path):
        self.path = path

    def restore(self, model, optimizer):
        ckpt = torch.load(os.environ["RESUME_FROM"], weights_only=False)  # expect: TB403
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
