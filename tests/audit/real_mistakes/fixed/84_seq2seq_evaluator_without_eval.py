# Fixed version of ../84_seq2seq_evaluator_without_eval.py: silent on the codes that file expects.
import torch


class Evaluator:
    def __init__(self, loss):
        self.loss = loss

    def evaluate(self, model, data):
        model.eval()
        self.loss.reset()
        with torch.no_grad():
            for batch in data:
                decoder_outputs = model(batch.src, batch.tgt)  # not: TB201
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
