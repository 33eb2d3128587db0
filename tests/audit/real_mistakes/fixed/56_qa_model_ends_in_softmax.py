# Fixed version of ../56_qa_model_ends_in_softmax.py: silent on the codes that file expects.
import torch  # noqa: F401
import torch.nn as nn


class CandidateScorer(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.linear(x).squeeze(-1)


def train(model, optimizer, loader, epochs):
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):  # noqa: B007
        for x, answer in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), answer)  # not: TB303
            loss.backward()
            optimizer.step()
