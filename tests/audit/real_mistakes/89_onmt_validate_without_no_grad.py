# Reconstructed after OpenNMT/OpenNMT-py issue #1141 ("torch.no_grad() in validate ?"; the maintainer: "I think you
# are correct, we forgot to include this during the 0.4 to 1.0 migration"): the trainer's validation ran the model
# with autograd recording, building a graph for every validation batch.
import torch  # noqa: F401


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
        for batch in valid_iter:
            outputs, attns = self.model(batch.src, batch.tgt, batch.src_lengths)  # expect: TB203
            total += self.valid_loss(batch, outputs, attns).item()
        self.model.train()
        return total
