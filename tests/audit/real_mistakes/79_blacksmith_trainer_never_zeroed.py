# Reconstructed after tenstorrent/tt-blacksmith PR #711 ("[Trainer] Fix Bug Where Zero Grad was Left Out": "we
# forgot to do zero_grad on optimizer after each optimizer step", merged): the LoRA trainer stepped the optimizer
# on gradients summed over every batch since the start.
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
                self.optimizer.step()  # expect: TB104
