# Reconstructed after d2l-ai/d2l-en PR #1786 ("Adding no_grad context manager block to the PyTorch versions of
# evaluate_accuracy and evaluate_accuracy_gpu", merged after the maintainer's review): the accuracy helper called
# after every training epoch ran the network in eval mode with gradients enabled.
import torch
from torch import nn


def evaluate_accuracy_gpu(net, data_iter, device=None):
    if isinstance(net, nn.Module):
        net.eval()
        if not device:
            device = next(iter(net.parameters())).device
    correct, total = 0, 0
    for X, y in data_iter:
        X, y = X.to(device), y.to(device)
        correct += (net(X).argmax(axis=1) == y).sum().item()  # expect: TB203
        total += y.numel()
    return correct / total


def train_ch6(net, train_iter, test_iter, num_epochs, lr, device):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    loss = nn.CrossEntropyLoss()
    for _epoch in range(num_epochs):
        net.train()
        for X, y in train_iter:
            optimizer.zero_grad()
            X, y = X.to(device), y.to(device)
            ls = loss(net(X), y)
            ls.backward()
            optimizer.step()
        evaluate_accuracy_gpu(net, test_iter)
