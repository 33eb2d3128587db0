# Reconstructed after DeepRank/deeprank issue #20 ("replace test() with model.eval()": test() ran the shared
# _epoch() with the network in training mode, dropout active; the maintainer: "I've added one line in ._epoch() to
# set the training mode"): the test pass went through the training epoch function without any mode switch.
import torch


class NeuralNet:
    def __init__(self, net, optimizer, criterion, train_loader, test_loader):
        self.net = net
        self.optimizer = optimizer
        self.criterion = criterion
        self.train_loader = train_loader
        self.test_loader = test_loader

    def _epoch(self, loader, train):
        running_loss = 0.0
        for inputs, targets in loader:
            outputs = self.net(inputs)  # expect: TB201
            loss = self.criterion(outputs, targets)
            running_loss += loss.item()
            if train:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        return running_loss

    def train(self, nepoch):
        for _ in range(nepoch):
            print(self._epoch(self.train_loader, train=True))

    def test(self):
        with torch.no_grad():
            return self._epoch(self.test_loader, train=False)  # also-ok: TB201
