# Reconstructed after pfnet/pytorch-pfn-extras issue #688 ("Recovering the mode of the model after running evaluator",
# labelled cat:bug, closed with the fix): train_validation_begin() put the models in eval mode and
# train_validation_end() did not restore train mode, which only train_epoch_begin() set; with the evaluator triggered
# at a non-integer epoch frequency, the rest of the epoch trained in eval mode.
import torch


class Logic:
    def __init__(self, model_name="main"):
        self.model_name = model_name

    def train_epoch_begin(self, models, epoch):
        models[self.model_name].train()

    def train_step(self, models, optimizers, batch):
        model = models[self.model_name]
        optimizer = optimizers[self.model_name]
        optimizer.zero_grad()
        loss = model(*batch)  # also-ok: TB202
        loss.backward()
        optimizer.step()
        return loss.item()

    def train_validation_begin(self, models):
        models[self.model_name].eval()  # also-ok: TB202

    def train_validation_end(self, models):
        pass

    def eval_step(self, models, batch):
        with torch.no_grad():
            return models[self.model_name](*batch).item()


class Trainer:
    def __init__(self, models, optimizers, eval_every):
        self.logic = Logic()
        self.models = models
        self.optimizers = optimizers
        self.eval_every = eval_every

    def run(self, train_loader, val_loader, max_epochs):
        iteration = 0
        for epoch in range(max_epochs):
            self.logic.train_epoch_begin(self.models, epoch)
            for batch in train_loader:
                self.logic.train_step(self.models, self.optimizers, batch)
                iteration += 1
                if iteration % self.eval_every == 0:
                    self.logic.train_validation_begin(self.models)  # expect: TB202
                    for val_batch in val_loader:
                        self.logic.eval_step(self.models, val_batch)
                    self.logic.train_validation_end(self.models)
