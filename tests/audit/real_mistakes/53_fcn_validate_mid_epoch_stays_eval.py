# Reconstructed after wkentaro/pytorch-fcn PR #56 ("Return to train mode after validation"; the maintainer fixed it
# in d10dd30): the trainer validated every `interval_validate` iterations inside train_epoch(); validate() set
# self.model.eval() and returned without switching back, so the rest of the epoch trained in eval mode (train() was
# only called at the top of the next epoch).
import torch


class Trainer:
    def __init__(self, model, optimizer, train_loader, val_loader, loss_fn, interval_validate):
        self.model = model
        self.optim = optimizer
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.loss_fn = loss_fn
        self.interval_validate = interval_validate
        self.iteration = 0

    def validate(self):
        self.model.eval()  # expect: TB202
        total = 0.0
        with torch.no_grad():
            for data, target in self.val_loader:
                total += self.loss_fn(self.model(data), target).item()
        return total / len(self.val_loader)

    def train_epoch(self):
        self.model.train()
        for data, target in self.train_loader:
            if self.iteration % self.interval_validate == 0:
                self.validate()
            self.optim.zero_grad()
            loss = self.loss_fn(self.model(data), target)
            loss.backward()
            self.optim.step()
            self.iteration += 1
