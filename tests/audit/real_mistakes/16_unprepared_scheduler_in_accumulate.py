# Reconstructed after starVLA/starVLA PR #210 ("fix(trainer): step LR scheduler only on actual optimizer
# updates", closes #204): inside accelerator.accumulate() the optimizer step is a no-op on non-sync
# micro-batches, but the scheduler (not handed to accelerator.prepare) advanced on every micro-batch; fixed by
# guarding lr_scheduler.step() with accelerator.sync_gradients.
import torch
from accelerate import Accelerator


def train(model, dataloader, gradient_accumulation_steps, max_steps):
    accelerator = Accelerator(gradient_accumulation_steps=gradient_accumulation_steps)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max_steps)
    model, optimizer, dataloader = accelerator.prepare(model, optimizer, dataloader)
    for batch in dataloader:
        with accelerator.accumulate(model):
            optimizer.zero_grad()
            loss = model(**batch).loss
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            lr_scheduler.step()  # expect: TB102
