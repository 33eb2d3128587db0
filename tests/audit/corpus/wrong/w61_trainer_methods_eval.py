import torch


class Trainer:
    def __init__(self, model, optimizer, train_loader, val_loader, loss_fn):
        self.model = model
        self.optimizer = optimizer
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.loss_fn = loss_fn

    def train_epoch(self):
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            self.loss_fn(self.model(x), y).backward()
            self.optimizer.step()

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        return sum(self.loss_fn(self.model(x), y).item() for x, y in self.val_loader)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.train_epoch()
            print(epoch, self.validate())  # expect: TB202
