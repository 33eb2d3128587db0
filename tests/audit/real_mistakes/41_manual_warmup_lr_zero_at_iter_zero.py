# Reconstructed after karpathy/nanoGPT PR #578 ("fix: ensure non-zero learning rate during warmup at iteration
# 0", fixes #443): get_lr(it) returned learning_rate * it / warmup_iters, so iteration 0 trained at lr 0; the fix
# uses (it + 1) / (warmup_iters + 1).
import math


def get_lr(it, learning_rate, min_lr, warmup_iters, lr_decay_iters):
    if it < warmup_iters:
        return learning_rate * it / warmup_iters  # expect: TB304
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def train(model, optimizer, get_batch, max_iters, **lr_args):
    for iter_num in range(max_iters):
        lr = get_lr(iter_num, **lr_args)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        X, Y = get_batch("train")
        logits, loss = model(X, Y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
