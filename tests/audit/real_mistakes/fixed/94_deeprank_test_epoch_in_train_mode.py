# Fixed version of ../94_deeprank_test_epoch_in_train_mode.py: silent on the codes that file expects.
import torch


class NeuralNet:
    def __init__(self, net, optimizer, criterion, train_loader, test_loader):
        self.net = net
        self.optimizer = optimizer
        self.criterion = criterion
        self.train_loader = train_loader
        self.test_loader = test_loader

    def _epoch(self, loader, train):
        self.net.train(mode=train)
        running_loss = 0.0
        for inputs, targets in loader:
            outputs = self.net(inputs)  # not: TB201
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
            return self._epoch(self.test_loader, train=False)  # not: TB201
