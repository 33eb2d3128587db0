# Reconstructed after Haian-Jin/LVSM PR #19 ("hotfix(train): resolve GradScaler RuntimeError when skipping
# optimizer…", https://github.com/Haian-Jin/LVSM/pull/19): train.py unscaled and clipped the gradients, and when the
# gradient norm exceeded a hard limit it skipped the optimizer step -- but scaler.update() sat inside the same
# `if not skip_optimizer_step:` branch, so after a skipped step the GradScaler was never updated and the next
# scaler.unscale_() raised "unscale_() has already been called on this optimizer since the last update()".  The
# merged fix moves scaler.update() out of the branch so it runs after every unscale, stepped or not.
import torch


def train_loop(config, model, optimizer, lr_scheduler, dataloader, device):
    use_amp = config.training.use_amp
    amp_dtype = torch.bfloat16 if config.training.amp_dtype == "bf16" else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp and amp_dtype == torch.float16)
    grad_accum_steps = config.training.grad_accum_steps
    allowed_gradnorm = config.training.allowed_gradnorm_factor * config.training.grad_clip_norm
    cur_param_update_step = 0

    model.train()
    optimizer.zero_grad(set_to_none=True)
    for fwdbwd_pass_step, batch in enumerate(dataloader):
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device_type="cuda", enabled=use_amp, dtype=amp_dtype):
            ret_dict = model(batch)
        loss = ret_dict["loss"] / grad_accum_steps
        scaler.scale(loss).backward()

        if (fwdbwd_pass_step + 1) % grad_accum_steps != 0:
            continue

        scaler.unscale_(optimizer)
        total_grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=config.training.grad_clip_norm)
        skip_optimizer_step = False
        if total_grad_norm > allowed_gradnorm:
            skip_optimizer_step = True
            print(f"WARNING: step {fwdbwd_pass_step} grad norm too large {total_grad_norm}, skipping optimizer step")

        if not skip_optimizer_step:
            scaler.step(optimizer)
            scaler.update()  # expect: TB107
            cur_param_update_step += 1
            lr_scheduler.step()

        optimizer.zero_grad(set_to_none=True)
    return cur_param_update_step
