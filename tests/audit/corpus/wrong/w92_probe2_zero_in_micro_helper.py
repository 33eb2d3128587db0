import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, opt, accum=4):
        self.model = model
        self.opt = opt
        self.accum = accum

    def micro_step(self, x, y):
        self.opt.zero_grad()  # expect: TB103
        loss = F.cross_entropy(self.model(x), y) / self.accum
        loss.backward()
        return loss.item()

    def train_epoch(self, loader):
        self.model.train()
        for i, (x, y) in enumerate(loader):
            self.micro_step(x, y)
            if (i + 1) % self.accum == 0:
                self.opt.step()
