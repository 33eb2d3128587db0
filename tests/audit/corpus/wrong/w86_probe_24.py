from torch.optim.lr_scheduler import LambdaLR

def warmup(optimizer, warmup_iters):
    def f(x):
        if x >= warmup_iters:
            return 1.0
        alpha = float(x) / warmup_iters
        return alpha  # expect: TB304
    return LambdaLR(optimizer, f)
