import torch


class Experiment:
    def __init__(self, model):
        self.model = model

    def checkpoint(self, path):
        torch.save(self.model, path)  # expect: TB404
