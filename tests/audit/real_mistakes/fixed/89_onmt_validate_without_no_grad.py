# Fixed version of ../89_onmt_validate_without_no_grad.py: silent on the codes that file expects.
import torch


class Trainer:
    def __init__(self, model, train_loss, valid_loss, optim):
        self.model = model
        self.train_loss = train_loss
        self.valid_loss = valid_loss
        self.optim = optim

    def train(self, train_iter, valid_iter, train_steps, valid_steps):
        step = 0
        self.model.train()
        while step < train_steps:
            for batch in train_iter:
                self.optim.zero_grad()
                outputs, attns = self.model(batch.src, batch.tgt, batch.src_lengths)
                loss = self.train_loss(batch, outputs, attns)
                loss.backward()
                self.optim.step()
                step += 1
                if step % valid_steps == 0:
                    print(self.validate(valid_iter))

    def validate(self, valid_iter):
        self.model.eval()
        total = 0.0
        with torch.no_grad():
            for batch in valid_iter:
                outputs, attns = self.model(batch.src, batch.tgt, batch.src_lengths)  # not: TB203
                total += self.valid_loss(batch, outputs, attns).item()
        self.model.train()
        return total
