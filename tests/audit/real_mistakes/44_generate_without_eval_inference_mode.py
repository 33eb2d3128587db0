# Reconstructed after ipolharvard/ethos-ares issue #20 ("Dropout active during inference and evaluation?",
# maintainer: "Good catch! This is definitely a bug."): the loss estimate and the inference run under
# @torch.inference_mode() only, and nothing calls model.eval(), so dropout stays active.
import torch


@torch.inference_mode()
def estimate_loss(model, loaders, eval_iters):
    out = {}
    for split, loader in loaders.items():
        losses = torch.zeros(eval_iters)
        for k, (x, y) in zip(range(eval_iters), loader):
            _, loss = model(x, y)  # expect: TB201
            losses[k] = loss.item()
        out[split] = losses.mean()
    return out
