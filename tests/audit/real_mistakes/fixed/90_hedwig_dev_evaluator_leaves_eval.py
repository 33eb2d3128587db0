# Fixed version of ../90_hedwig_dev_evaluator_leaves_eval.py: silent on the codes that file expects.
import torch


class ClassificationEvaluator:
    def __init__(self, model, dev_loader):
        self.model = model
        self.dev_loader = dev_loader

    def get_scores(self):
        self.model.eval()  # not: TB202
        correct = 0
        with torch.no_grad():
            for text, label in self.dev_loader:
                correct += (self.model(text).argmax(1) == label).sum().item()
        return correct


class ClassificationTrainer:
    def __init__(self, model, optimizer, train_loader, dev_evaluator, epochs):
        self.model = model
        self.optimizer = optimizer
        self.train_loader = train_loader
        self.dev_evaluator = dev_evaluator
        self.epochs = epochs

    def train_epoch(self):
        self.model.train()
        for text, label in self.train_loader:
            self.optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(self.model(text), label)
            loss.backward()
            self.optimizer.step()

    def train(self):
        for _ in range(self.epochs):
            self.train_epoch()
            print(self.dev_evaluator.get_scores())  # not: TB202
