# Reconstructed after facebookresearch/nwm issue #16 ("Missing opt.zero_grad() when bfloat16 is enabled causes silent gradient accumulation", closed-as-fixed, https://github.com/facebookresearch/nwm/issues/16), fixed by the maintainer in commit 7782ade ("fix zero_grad bug"): in train.py the training step called opt.zero_grad() only inside the `if not bfloat_enable:` branch; the mixed-precision branch (autocast + GradScaler) went straight to scaler.scale(loss).backward(), so with --bfloat16 every step's gradients were added onto all previous ones and the optimizer stepped on the ever-growing sum. The fix moves opt.zero_grad() above the if/else so both paths clear gradients.
# Fixed version (the maintainer's fix commit applied).
from collections import OrderedDict
from copy import deepcopy

import torch
import torch.distributed as dist


@torch.no_grad()
def update_ema(ema_model, model, decay=0.9999):
    ema_params = OrderedDict(ema_model.named_parameters())
    model_params = OrderedDict(model.named_parameters())

    for name, param in model_params.items():
        name = name.replace('_orig_mod.', '')
        ema_params[name].mul_(decay).add_(param.data, alpha=1 - decay)


def requires_grad(model, flag=True):
    for p in model.parameters():
        p.requires_grad = flag


def train(args, config, model, tokenizer, diffusion, loader, sampler, device, logger,
          start_epoch=0, train_steps=0):
    num_cond = config['context_size']
    ema = deepcopy(model.module).to(device)
    requires_grad(ema, False)

    lr = float(config.get('lr', 1e-4))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0)

    bfloat_enable = bool(hasattr(args, 'bfloat16') and args.bfloat16)
    if bfloat_enable:
        scaler = torch.amp.GradScaler()

    model.train()
    ema.eval()

    log_steps = 0
    running_loss = 0

    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        logger.info(f"Beginning epoch {epoch}...")

        for x, y, rel_t in loader:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            rel_t = rel_t.to(device, non_blocking=True)

            with torch.amp.autocast('cuda', enabled=bfloat_enable, dtype=torch.bfloat16):
                with torch.no_grad():
                    B, T = x.shape[:2]
                    x = x.flatten(0, 1)
                    x = tokenizer.encode(x).latent_dist.sample().mul_(0.18215)
                    x = x.unflatten(0, (B, T))

                num_goals = T - num_cond
                x_start = x[:, num_cond:].flatten(0, 1)
                x_cond = x[:, :num_cond].unsqueeze(1).expand(B, num_goals, num_cond, x.shape[2], x.shape[3], x.shape[4]).flatten(0, 1)
                y = y.flatten(0, 1)
                rel_t = rel_t.flatten(0, 1)

                t = torch.randint(0, diffusion.num_timesteps, (x_start.shape[0],), device=device)
                model_kwargs = dict(y=y, x_cond=x_cond, rel_t=rel_t)
                loss_dict = diffusion.training_losses(model, x_start, t, model_kwargs)
                loss = loss_dict["loss"].mean()

            opt.zero_grad()  # not: TB???
            if not bfloat_enable:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()  # not: TB???
                if config.get('grad_clip_val', 0) > 0:
                    scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=config['grad_clip_val'])
                scaler.step(opt)
                scaler.update()

            update_ema(ema, model.module)

            running_loss += loss.detach().item()
            log_steps += 1
            train_steps += 1
            if train_steps % args.log_every == 0:
                avg_loss = torch.tensor(running_loss / log_steps, device=device)
                dist.all_reduce(avg_loss, op=dist.ReduceOp.SUM)
                avg_loss = avg_loss.item() / dist.get_world_size()
                logger.info(f"(step={train_steps:07d}) Train Loss: {avg_loss:.4f}")
                running_loss = 0
                log_steps = 0

    model.eval()
    return ema
