# Reconstructed after bowang-lab/Transformer-GCN-QA PR #32 ("Removes erroneous extra softmax": "we didn't realize
# that CrossEntropyLoss() itself implements a softmax, we had a second, erroneous softmax at the output of our
# model", merged): the candidate-scoring model's forward ended in a softmax and training used CrossEntropyLoss.
import torch
import torch.nn as nn


class CandidateScorer(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear = nn.Linear(hidden, 1)

    def forward(self, x):
        scores = self.linear(x).squeeze(-1)
        return torch.softmax(scores, dim=-1)


def train(model, optimizer, loader, epochs):
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):  # noqa: B007
        for x, answer in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), answer)  # expect: TB303
            loss.backward()
            optimizer.step()
