# Fixed version of ../55_gnn_softmax_before_cross_entropy.py: silent on the codes that file expects.
import torch  # noqa: F401
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401


def train_epoch(model, optimizer, loader):
    criterion = nn.CrossEntropyLoss()
    model.train()
    for graph, target in loader:
        scores = model(graph)
        loss = criterion(scores, target)  # not: TB303
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
