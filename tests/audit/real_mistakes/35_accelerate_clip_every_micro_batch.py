# Reconstructed after huggingface/accelerate issue #641 ("Gradient accumulation doesn't work with Accelerate's
# `clip_grad_norm_`"): the user's trainer clipped with accelerator.clip_grad_norm_ on every micro-batch inside
# accelerator.accumulate(); under fp16 that call unscales the gradients itself (and may run once per update
# only), so the clip is misplaced (per micro-batch) but NOT applied to scaled gradients; the fix clips only
# when accelerator.sync_gradients.
from accelerate import Accelerator


def train_one_epoch(model, dataloader, optimizer, lr_scheduler, max_grad_norm, gradient_accumulation_steps):
    accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=gradient_accumulation_steps)
    model, optimizer, dataloader, lr_scheduler = accelerator.prepare(model, optimizer, dataloader, lr_scheduler)
    for batch in dataloader:
        with accelerator.accumulate(model):
            optimizer.zero_grad()
            _, loss = model(**batch)
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)  # expect: TB109  # not: TB106
            optimizer.step()
            lr_scheduler.step()
