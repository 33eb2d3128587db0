# Reconstructed after Lightning-AI/lit-llama PR #357 ("Add Loss Averaging and no_backward_sync() in Gradient
# Accumulation Logic", https://github.com/Lightning-AI/lit-llama/pull/357): finetune/lora.py accumulated gradients
# over gradient_accumulation_iters micro-batches but called fabric.backward(loss) on the full per-micro-batch mean
# loss, so the summed gradient was gradient_accumulation_iters times too large.  Maintainer carmocca reviewed it
# ("Great catch!") and awaelchli agreed; it was merged with fabric.backward(loss / gradient_accumulation_iters).
# (The PR also wrapped the micro-step in fabric.no_backward_sync for speed; that part is not reconstructed here.)
import time

import lightning as L
import torch
import torch.nn.functional as F


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = logits[..., :-1, :].contiguous()
    targets = targets[..., 1:].contiguous()
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def train(fabric: L.Fabric, model: torch.nn.Module, optimizer: torch.optim.Optimizer, train_data, val_data,
          get_batch, validate, max_iters: int, gradient_accumulation_iters: int, eval_interval: int,
          log_interval: int) -> None:
    step_count = 0
    for iter_num in range(max_iters):
        t0 = time.time()

        input_ids, targets = get_batch(fabric, train_data)
        logits = model(input_ids)
        loss = loss_fn(logits, targets)
        fabric.backward(loss)  # expect: TB105

        if (iter_num + 1) % gradient_accumulation_iters == 0:
            optimizer.step()
            optimizer.zero_grad()
            step_count += 1

            if step_count % eval_interval == 0:
                val_loss = validate(fabric, model, val_data)
                fabric.print(f"step {iter_num}: val loss {val_loss:.4f}")
                fabric.barrier()

        dt = time.time() - t0
        if iter_num % log_interval == 0:
            fabric.print(f"iter {iter_num}: loss {loss.item():.4f}, time: {dt*1000:.2f}ms")
