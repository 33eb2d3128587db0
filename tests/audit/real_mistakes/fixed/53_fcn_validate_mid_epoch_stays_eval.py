# Fixed version of ../53_fcn_validate_mid_epoch_stays_eval.py: silent on the codes that file expects.
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
        training = self.model.training
        self.model.eval()  # not: TB202
        total = 0.0
        with torch.no_grad():
            for data, target in self.val_loader:
                total += self.loss_fn(self.model(data), target).item()
        if training:
            self.model.train()
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
