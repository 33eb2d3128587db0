"""Accelerate: accumulate() context, accelerator.backward, clipping when gradients sync (correct)."""
import torch
from accelerate import Accelerator


def main(model, dataloader, loss_function, num_epochs=3):
    accelerator = Accelerator(gradient_accumulation_steps=4, mixed_precision="fp16")
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=100)
    model, optimizer, dataloader, scheduler = accelerator.prepare(model, optimizer, dataloader, scheduler)
    for epoch in range(num_epochs):
        model.train()
        for batch in dataloader:
            with accelerator.accumulate(model):
                inputs, targets = batch
                outputs = model(inputs)
                loss = loss_function(outputs, targets)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
