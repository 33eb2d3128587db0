# Reconstructed after SWivid/F5-TTS issue #631 ("EMA Update independently from `grad_accumulation_steps`"):
# the EMA model was updated after the `accelerator.accumulate` block on every micro-batch, not once per
# optimizer update ("just a bug", fixed in #628 by updating only when accelerator.sync_gradients).
def train(accelerator, model, ema_model, optimizer, scheduler, train_dataloader, epochs, max_grad_norm):
    for _epoch in range(epochs):
        model.train()
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                loss, cond, pred = model(batch["mel"], text=batch["text"], lens=batch["mel_lengths"])
                accelerator.backward(loss)
                if max_grad_norm > 0 and accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if accelerator.is_main_process:
                ema_model.update()  # expect: TB108
