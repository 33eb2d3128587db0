"""Probe 7 shapes: a warm-up bound with partial, a scaled Noam factor, a module-level loss log, a class whose
softmax is a layer attribute."""
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

epoch_losses = []
HIDDEN = 256


def ramp(it, *, warm, floor=0.1):
    if it < warm:
        return it / warm  # expect: TB304
    return max(floor, 1.0 - (it - warm) / 10_000)


def make_schedulers(opt_a, opt_b):
    a = torch.optim.lr_scheduler.LambdaLR(opt_a, lr_lambda=partial(ramp, warm=300))
    b = torch.optim.lr_scheduler.LambdaLR(
        opt_b, lambda k: 3.0 * HIDDEN ** -0.5 * min(k ** -0.5 if k > 0 else 0.0, k * 2000 ** -1.5))  # expect: TB304
    return a, b


class Scorer(nn.Module):
    def __init__(self, n_in, n_cls):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(n_in, 64), nn.GELU())
        self.out = nn.Sequential(nn.Linear(64, n_cls), nn.Softmax(dim=-1))

    def forward(self, feats):
        return self.out(self.trunk(feats))


def run(batches, n_in, n_cls):
    scorer = Scorer(n_in, n_cls)
    opt = torch.optim.SGD(scorer.parameters(), lr=0.05)
    for feats, cls in batches:
        probs = scorer(feats)
        loss = F.cross_entropy(probs, cls)  # expect: TB303
        opt.zero_grad()
        loss.backward()
        opt.step()
        epoch_losses.append(loss)  # expect: TB204


def fit_full_batch(net, opt, inputs, targets, inputs_valid, targets_valid, rounds=50):
    for _ in range(rounds):
        net.train()
        opt.zero_grad()
        F.nll_loss(torch.log(net(inputs) + 1e-8), targets).backward()
        opt.step()
        with torch.inference_mode():
            hits = net(inputs_valid).argmax(-1).eq(targets_valid).sum()  # expect: TB201
        print(hits.item() / len(targets_valid))
