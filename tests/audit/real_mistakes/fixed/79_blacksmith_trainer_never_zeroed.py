# Fixed version of ../79_blacksmith_trainer_never_zeroed.py: silent on the codes that file expects.
import torch  # noqa: F401


class Trainer:
    def __init__(self, model, optimizer, loss_fn):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = loss_fn

    def train(self, loader, epochs):
        self.model.train()
        for _ in range(epochs):
            for batch in loader:
                loss = self.loss_fn(self.model(batch["input_ids"]), batch["labels"])
                loss.backward()
                self.optimizer.step()  # not: TB104
                self.optimizer.zero_grad()
