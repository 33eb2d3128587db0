import torch


class AmpTrainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.scaler = torch.amp.GradScaler("cuda")

    def fit(self, loader, criterion):
        for x, y in loader:
            self.optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = criterion(self.model(x), y)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)  # expect: TB107
