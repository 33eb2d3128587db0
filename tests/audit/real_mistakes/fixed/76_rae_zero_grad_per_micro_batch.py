# Fixed version of ../76_rae_zero_grad_per_micro_batch.py: silent on the codes that file expects.
import torch  # noqa: F401


def train_step(model, optimizer, batch, grad_accum_steps, loss_fn):
    model.train()
    micro_batches = batch.chunk(grad_accum_steps)
    optimizer.zero_grad(set_to_none=True)
    for micro in micro_batches:
        loss = loss_fn(model(micro)) / grad_accum_steps
        loss.backward()
    optimizer.step()  # not: TB103
