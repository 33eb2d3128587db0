# Reconstructed after verl-project/verl issue #3674 ("Learning is zero for the first iteration when warmup
# enabled"): the constant-with-warmup LambdaLR returns current_step / num_warmup_steps, which is 0 for the first
# update (the scheduler steps after the update), so the first optimizer step is a no-op.
import torch


def get_constant_schedule_with_warmup(optimizer, num_warmup_steps, last_epoch=-1):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1.0, num_warmup_steps))  # expect: TB304
        return 1.0

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda, last_epoch=last_epoch)  # also-ok: TB304


def update_actor(actor, optimizer, data, num_warmup_steps):
    scheduler = get_constant_schedule_with_warmup(optimizer, num_warmup_steps)
    for batch in data:
        optimizer.zero_grad()
        loss = actor(batch)
        loss.backward()
        optimizer.step()
        scheduler.step()
