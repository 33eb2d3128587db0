# Reconstructed after neuroailab/ptutils issue #22 ("turn train mode back on after evaluation", closed as "fixed in
# 15899454"): the runner's training loop ran a validation pass every few steps through a method that put the model in
# eval mode; train mode was set once before the loop, so training continued in eval mode after the first validation.
import torch


class Runner:
    def __init__(self, model, criterion, optimizer, train_loader, val_loader, val_every):
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.val_every = val_every

    def validate(self):
        self.model.eval()
        total = 0.0
        with torch.no_grad():
            for x, y in self.val_loader:
                total += self.criterion(self.model(x), y).item()
        return total / len(self.val_loader)

    def train(self, num_steps):
        self.model.train()
        step = 0
        while step < num_steps:
            for x, y in self.train_loader:
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)  # also-ok: TB202
                loss.backward()
                self.optimizer.step()
                step += 1
                if step % self.val_every == 0:
                    self.validate()  # expect: TB202
