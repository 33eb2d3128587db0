# Fixed version of ../118_ptutils_runner_validation_leaves_eval.py: silent on the codes that file expects.
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
        self.model.train()
        return total / len(self.val_loader)

    def train(self, num_steps):
        self.model.train()
        step = 0
        while step < num_steps:
            for x, y in self.train_loader:
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                step += 1
                if step % self.val_every == 0:
                    self.validate()  # not: TB202
