# Reconstructed after havakv/torchtuples PR #9 ("Change back to training mode after eval_.", merged): the model's
# eval_() helper, run on the validation data at the end of each epoch of fit(), switched the network to eval mode and
# left it there for the following epochs.
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
        return total / len(val_loader)

    def fit(self, loader, val_loader, epochs):
        self.net.train()
        for _ in range(epochs):
            for x, y in loader:
                self.optimizer.zero_grad()
                out = self.net(x)  # also-ok: TB202
                batch_loss = self.loss(out, y)
                batch_loss.backward()
                self.optimizer.step()
            self.eval_(val_loader)  # expect: TB202
