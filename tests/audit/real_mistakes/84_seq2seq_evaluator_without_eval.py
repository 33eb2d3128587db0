# Reconstructed after IBM/pytorch-seq2seq PR #38 ("Set model in eval mode when inferencing", addresses #33,
# merged): the evaluator computed the dev loss with dropout active, the model left in training mode.
import torch


class Evaluator:
    def __init__(self, loss):
        self.loss = loss

    def evaluate(self, model, data):
        self.loss.reset()
        with torch.no_grad():
            for batch in data:
                decoder_outputs = model(batch.src, batch.tgt)  # expect: TB201
                self.loss.eval_batch(decoder_outputs, batch.tgt)
        return self.loss.get_loss()


def train(model, optimizer, loss, train_data, dev_data, epochs):
    evaluator = Evaluator(loss)
    for _ in range(epochs):
        model.train()
        for batch in train_data:
            optimizer.zero_grad()
            out = model(batch.src, batch.tgt)
            batch_loss = loss.compute(out, batch.tgt)
            batch_loss.backward()
            optimizer.step()
        print(evaluator.evaluate(model, dev_data))
