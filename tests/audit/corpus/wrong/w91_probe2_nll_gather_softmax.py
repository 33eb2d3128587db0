import torch


def my_cross_entropy(logits, labels):
    probs = logits.softmax(-1)
    picked = torch.gather(probs, 1, labels[:, None]).squeeze(1)
    return -picked.mean()  # expect: TB303
