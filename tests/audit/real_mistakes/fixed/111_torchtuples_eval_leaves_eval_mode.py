# Fixed version of ../111_torchtuples_eval_leaves_eval_mode.py: silent on the codes that file expects.
import torch


class Model:
    def __init__(self, net, loss, optimizer):
        self.net = net
        self.loss = loss
        self.optimizer = optimizer

    def eval_(self, val_loader):
        self.net.eval()
        total = 0.0
        with torch.no_grad():
            for x, y in val_loader:
                total += self.loss(self.net(x), y).item()
        self.net.train()
        return total / len(val_loader)

    def fit(self, loader, val_loader, epochs):
        self.net.train()
        for _ in range(epochs):
            for x, y in loader:
                self.optimizer.zero_grad()
                out = self.net(x)  # not: TB202
                batch_loss = self.loss(out, y)
                batch_loss.backward()
                self.optimizer.step()
            self.eval_(val_loader)
