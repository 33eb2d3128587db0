# Reconstructed after bytetriper/RAE issue #67 ("train.py: zero_grad is called per microbatch, breaking gradient
# accumulation"; the maintainer thanked the reporter and asked for the fix, PR #78): the inner micro-batch loop
# cleared the gradients before every micro-batch, so only the last one reached the optimizer step.
import torch  # noqa: F401


def train_step(model, optimizer, batch, grad_accum_steps, loss_fn):
    model.train()
    micro_batches = batch.chunk(grad_accum_steps)
    for micro in micro_batches:
        optimizer.zero_grad(set_to_none=True)  # expect: TB103
        loss = loss_fn(model(micro)) / grad_accum_steps
        loss.backward()
    optimizer.step()
