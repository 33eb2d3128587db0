# Fixed version of ../109_flair_evaluate_without_no_grad.py: silent on the codes that file expects.
import torch


class SequenceTaggerTrainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def train(self, train_batches, dev_batches, max_epochs):
        for _epoch in range(max_epochs):
            self.model.train()
            for batch in train_batches:
                self.model.zero_grad()
                loss = self.model.neg_log_likelihood(batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
                self.optimizer.step()
            self.evaluate(dev_batches)

    def evaluate(self, batches):
        with torch.no_grad():
            self.model.eval()
            correct = 0
            for batch in batches:
                scores, tags = self.model(batch)  # not: TB203
                correct += sum(int(t == s.gold) for t, s in zip(tags, batch))
            return correct
