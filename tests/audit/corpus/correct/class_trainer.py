"""A Trainer class with train_epoch / evaluate / fit methods, EMA and a per-step schedule (correct)."""
import torch
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


class Trainer:
    def __init__(self, model, train_loader, val_loader, lr=0.1, epochs=10):
        self.model = model
        self.train_loader, self.val_loader = train_loader, val_loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=epochs * len(train_loader))
        self.ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
        self.epochs = epochs

    def train_epoch(self):
        self.model.train()
        total = 0.0
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            self.ema_model.update_parameters(self.model)
            total += loss.item()
        return total / len(self.train_loader)

    @torch.no_grad()
    def evaluate(self, model=None):
        net = model or self.ema_model
        net.eval()
        correct = 0
        for x, y in self.val_loader:
            correct += (net(x).argmax(1) == y).sum().item()
        return correct / len(self.val_loader.dataset)

    def fit(self):
        for epoch in range(self.epochs):
            loss = self.train_epoch()
            acc = self.evaluate()
            print(f"epoch {epoch}: loss {loss:.3f} acc {acc:.3f}")
