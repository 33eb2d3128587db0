import torch
import torch.nn as nn
import torch.nn.functional as F


class TextClassifier(nn.Module):
    def __init__(self, vocab, dim=128, classes=4):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim)
        self.out = nn.Linear(dim, classes)

    def forward(self, tokens, offsets):
        scores = self.out(self.emb(tokens, offsets))
        probs = torch.softmax(scores, dim=-1)
        return probs


def fit(net, batches, opt, loss_fn=nn.CrossEntropyLoss(label_smoothing=0.1)):
    net.train()
    for tokens, offsets, labels in batches:
        opt.zero_grad()
        out = net(tokens, offsets)
        loss = loss_fn(out, labels)  # expect: TB303
        loss.backward()
        opt.step()


def fine_tune(model, batches, opt, *, nll=nn.NLLLoss()):
    for tokens, offsets, labels in batches:
        opt.zero_grad()
        p = torch.softmax(model.out(model.emb(tokens, offsets)), -1)
        nll(p, labels).backward()  # expect: TB303
        opt.step()
