# Reconstructed after gradsflow/gradsflow-automl PR #70 ("set model.eval() in val_epoch", merged by its maintainer):
# the model's validation epoch ran the learner under torch.no_grad() but in train mode.
import torch


class Model:
    def __init__(self, learner, loss, optimizer):
        self.learner = learner
        self.loss = loss
        self.optimizer = optimizer

    def train_epoch(self, loader):
        self.learner.train()
        running = 0.0
        for inputs, target in loader:
            self.optimizer.zero_grad()
            loss = self.loss(self.learner(inputs), target)
            loss.backward()
            self.optimizer.step()
            running += loss.item()
        return running

    def val_epoch(self, loader):
        running = 0.0
        with torch.no_grad():
            for inputs, target in loader:
                logits = self.learner(inputs)  # expect: TB201
                running += self.loss(logits, target).item()
        return running

    def fit(self, train_loader, val_loader, epochs):
        for _ in range(epochs):
            self.train_epoch(train_loader)
            self.val_epoch(val_loader)
