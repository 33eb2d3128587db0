# Reconstructed after PaulCCCCCCH/Robustar_implementation PR #165 ("fixed wrong accuracy issue when loading a
# trained model"): the test routine of the trainer class evaluated the loaded network without net.eval(), so
# its accuracy looked like a randomly initialised model's.
import torch


class Trainer:
    def __init__(self, net, criterion, optimizer, train_loader, test_loader, device):
        self.net = net
        self.criterion = criterion
        self.optimizer = optimizer
        self.train_loader, self.test_loader = train_loader, test_loader
        self.device = device

    def train_one_epoch(self):
        self.net.train()
        for inputs, labels in self.train_loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.net(inputs.to(self.device)), labels.to(self.device))
            loss.backward()
            self.optimizer.step()

    def start_test(self):
        correct = 0
        with torch.no_grad():
            for inputs, labels in self.test_loader:
                outputs = self.net(inputs.to(self.device))  # expect: TB201
                correct += (outputs.argmax(1) == labels.to(self.device)).sum().item()
        return correct / len(self.test_loader.dataset)
