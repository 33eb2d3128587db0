# Fixed version of ../151_litllama_lora_accumulated_loss_not_divided.py: silent on the codes that file expects.
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
        fabric.backward(loss / gradient_accumulation_iters)  # not: TB105

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
