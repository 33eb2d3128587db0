import torch
import torch.nn as nn


class TokenTagger(nn.Module):
    def __init__(self, vocab, tags, dim=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens):
        h, _ = self.rnn(self.emb(tokens))
        return self.out(h)


def tagging_loss(model, tokens, tags, criterion=nn.CrossEntropyLoss(ignore_index=-1)):
    scores = model(tokens).softmax(dim=-1)
    flat = scores.flatten(0, 1)
    return criterion(flat.contiguous(), tags.flatten())  # expect: TB303


def segmentation_loss(logits, mask):
    probs = torch.softmax(logits, 1)
    return torch.nn.functional.nll_loss(probs.permute(0, 2, 3, 1).reshape(-1, probs.shape[1]),  # expect: TB303
                                        mask.reshape(-1))
