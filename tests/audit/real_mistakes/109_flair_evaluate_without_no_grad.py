# Reconstructed after flairNLP/flair PR #133 ("GH-108: Use torch.no_grad in evaluation method", merged): the trainer's
# evaluation ran the tagger over the dev and test sentences with gradients enabled after every training epoch.
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
        self.model.eval()
        correct = 0
        for batch in batches:
            scores, tags = self.model(batch)  # expect: TB203
            correct += sum(int(t == s.gold) for t, s in zip(tags, batch))
        return correct
