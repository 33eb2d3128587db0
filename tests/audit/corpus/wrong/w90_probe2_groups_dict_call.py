import torch


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.Adam(
            [
                dict(params=model.encoder.parameters(), lr=1e-4),
                dict(param=model.decoder.parameters(), lr=1e-3),  # expect: TB301
            ]
        )
