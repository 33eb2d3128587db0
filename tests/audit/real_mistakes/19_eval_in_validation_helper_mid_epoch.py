# Reconstructed after joeynmt/joeynmt issue #184 ("model.eval()"): the trainer validates every
# validation_freq steps through a helper that sets model.eval(); model.train() is only called at the start of
# each epoch, so the rest of the epoch trains in eval mode.
import torch


def validate_on_data(model, data, loss_function):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for src, trg in data:
            total += loss_function(model(src), trg).item()
    return total


class TrainManager:
    def __init__(self, model, optimizer, loss_function, validation_freq):
        self.model, self.optimizer = model, optimizer
        self.loss_function = loss_function
        self.validation_freq = validation_freq
        self.steps = 0

    def _validate(self, valid_data):
        return validate_on_data(self.model, valid_data, self.loss_function)  # expect: TB202

    def train_and_validate(self, train_data, valid_data, epochs):
        for _epoch in range(epochs):
            self.model.train()
            for src, trg in train_data:
                loss = self.loss_function(self.model(src), trg)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.steps += 1
                if self.steps % self.validation_freq == 0:
                    self._validate(valid_data)  # also-ok: TB202
