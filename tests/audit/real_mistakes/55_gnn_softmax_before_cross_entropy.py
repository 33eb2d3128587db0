# Reconstructed after mlelarge/graph_neural_net PR #37 ("Fix bug softmax": "There was a softmax before a
# crossentropyloss... I removed the softmax", merged by the maintainer): the model's scores were turned into
# probabilities with a softmax and then given to nn.CrossEntropyLoss, which applies log_softmax itself.
import torch  # noqa: F401
import torch.nn as nn
import torch.nn.functional as F


def train_epoch(model, optimizer, loader):
    criterion = nn.CrossEntropyLoss()
    model.train()
    for graph, target in loader:
        scores = model(graph)
        proba = F.softmax(scores, dim=-1)
        loss = criterion(proba, target)  # expect: TB303
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
