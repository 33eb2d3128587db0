# Fixed version of ../86_dssm_softmax_into_cross_entropy.py: silent on the codes that file expects.
import torch
import torch.nn as nn


class CDSSM(nn.Module):
    def __init__(self, depth, k, latent, negatives):
        super().__init__()
        self.query_sem = nn.Linear(depth, latent)
        self.doc_sem = nn.Linear(depth, latent)
        self.learn_gamma = nn.Conv1d(1, 1, 1)
        self.negatives = negatives

    def forward(self, q, pos, negs):
        q_s = torch.tanh(self.query_sem(q))
        docs = [torch.tanh(self.doc_sem(d)) for d in [pos, *negs]]
        dots = torch.stack([q_s.dot(d) for d in docs])
        with_gamma = self.learn_gamma(dots.view(self.negatives + 1, 1, 1))
        # the logits for CrossEntropyLoss
        return with_gamma


def train(samples, depth, negatives):
    model = CDSSM(depth, 300, 128, negatives)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    y = torch.zeros(1, dtype=torch.long)
    for q, pos, negs in samples:
        y_pred = model(q, pos, negs)
        loss = criterion(y_pred.view(1, negatives + 1), y)  # not: TB303
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
