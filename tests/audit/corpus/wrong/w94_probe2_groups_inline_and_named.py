import torch


def make(net):
    return torch.optim.SGD([{"params": net.a.parameters()}, {"parameters": net.b.parameters()}], lr=0.1)  # expect: TB301


def make2(net):
    groups = [{"model": net.a.parameters()}]  # expect: TB301
    return torch.optim.SGD(groups, lr=0.1)


def make3(net):
    return torch.optim.SGD([{"param": net.a.parameters()}], lr=0.1)  # expect: TB301
