# Reconstructed after modelscope/FunASR PR #3472 ("fix(train): align DDP no_sync with gradient accumulation"):
# the trainer's condition `batch_idx % accum_grad != 0` synchronised the first micro-batch and ran the micro-batch
# that steps the optimizer under model.no_sync(), so each rank stepped with its own unsynchronised gradients; the
# fix uses (batch_idx + 1) % accum_grad.
from contextlib import nullcontext


def train_epoch(model, optimizer, scheduler, dataloader, accum_grad, use_ddp):
    model.train()
    for batch_idx, batch in enumerate(dataloader):
        sync_ctx = model.no_sync if use_ddp and batch_idx % accum_grad != 0 else nullcontext
        with sync_ctx():  # expect: TB111
            loss = model(**batch)["loss"] / accum_grad
            loss.backward()
        if (batch_idx + 1) % accum_grad == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
