# Reconstructed after wolny/pytorch-3dunet issue #53 ("Need to set the model to 'eval' mode when assessing the
# validation data"): the trainer's validate() ran the shared forward helper under no_grad but never called
# self.model.eval(), so dropout and BatchNorm ran in training mode on the validation set.
import torch


class UNet3DTrainer:
    def __init__(self, model, optimizer, loss_criterion, eval_criterion):
        self.model = model
        self.optimizer = optimizer
        self.loss_criterion = loss_criterion
        self.eval_criterion = eval_criterion

    def _forward_pass(self, input, target):
        output = self.model(input)  # also-ok: TB201
        return output, self.loss_criterion(output, target)

    def train(self, train_loader):
        self.model.train()
        for input, target in train_loader:
            output, loss = self._forward_pass(input, target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def validate(self, val_loader):
        scores = []
        with torch.no_grad():
            for input, target in val_loader:
                output, loss = self._forward_pass(input, target)  # expect: TB201
                scores.append(self.eval_criterion(output, target).item())
        return sum(scores) / len(scores)
