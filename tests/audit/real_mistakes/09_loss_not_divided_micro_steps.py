# Reconstructed after karpathy/nanoGPT issue #168 ("Should `loss` be divided by
# `gradient_accumulation_steps`?"): the micro-step loop back-propagated the full loss of every micro-batch, so
# the update was the sum of the gradients and the clip threshold silently gradient_accumulation_steps times
# lower; fixed by `loss = loss / gradient_accumulation_steps`.
import torch


def train(model, optimizer, get_batch, ctx, max_iters, gradient_accumulation_steps, grad_clip):
    scaler = torch.amp.GradScaler("cuda")
    X, Y = get_batch("train")
    for _ in range(max_iters):
        for _micro_step in range(gradient_accumulation_steps):
            with ctx:
                logits, loss = model(X, Y)
            X, Y = get_batch("train")
            scaler.scale(loss).backward()  # expect: TB105
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
