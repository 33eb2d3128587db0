import torch


def make(optimizer, args):
    lr_lambda = lambda epoch: epoch / args.warmup_epochs  # expect: TB304
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
