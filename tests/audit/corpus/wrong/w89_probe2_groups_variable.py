import torch


def make_opt(net, base_lr=0.1):
    no_decay = [p for n, p in net.named_parameters() if n.endswith("bias")]
    decay = [p for n, p in net.named_parameters() if not n.endswith("bias")]
    groups = [
        {"params": decay, "weight_decay": 5e-4},
        {"parameters": no_decay, "weight_decay": 0.0},  # expect: TB301
    ]
    return torch.optim.SGD(groups, lr=base_lr, momentum=0.9)
