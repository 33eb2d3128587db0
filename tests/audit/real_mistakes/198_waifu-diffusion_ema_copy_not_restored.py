# Reconstructed after harubaru/waifu-diffusion PR #31 ("Restore non-EMA weights after saving checkpoint", merged, https://github.com/harubaru/waifu-diffusion/pull/31): save_checkpoint() copied the EMA shadow weights into the live UNet (ema_unet.copy_to(unet.parameters())) to export them, but never put the raw weights back, so after every save_steps the optimizer kept training from the EMA average instead of its own weights. The fix adds EMAModel.store()/restore() and brackets the export with ema_unet.store(...) before copy_to and ema_unet.restore(...) after save_pretrained.
import gc
from typing import Iterable

import torch
from diffusers import PNDMScheduler, StableDiffusionPipeline


# Adapted from torch-ema https://github.com/fadel/pytorch_ema/blob/master/torch_ema/ema.py#L14
class EMAModel:
    """
    Exponential Moving Average of models weights
    """

    def __init__(self, parameters: Iterable[torch.nn.Parameter], decay=0.9999):
        parameters = list(parameters)
        self.shadow_params = [p.clone().detach() for p in parameters]
        self.decay = decay
        self.optimization_step = 0

    def get_decay(self, optimization_step):
        value = (1 + optimization_step) / (10 + optimization_step)
        return 1 - min(self.decay, value)

    @torch.no_grad()
    def step(self, parameters):
        parameters = list(parameters)
        self.optimization_step += 1
        self.decay = self.get_decay(self.optimization_step)
        for s_param, param in zip(self.shadow_params, parameters):
            if param.requires_grad:
                tmp = self.decay * (s_param - param)
                s_param.sub_(tmp)
            else:
                s_param.copy_(param)

    def copy_to(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        parameters = list(parameters)
        for s_param, param in zip(self.shadow_params, parameters):
            param.data.copy_(s_param.data)


def train(args, rank, unet, vae, text_encoder, tokenizer, optimizer, lr_scheduler, scaler,
          noise_scheduler, train_dataloader, device, weight_dtype):
    # create ema
    if args.use_ema:
        ema_unet = EMAModel(unet.parameters())

    global_step = 0

    def save_checkpoint(global_step):
        if rank == 0:
            if args.use_ema:
                ema_unet.copy_to(unet.parameters())  # expect: TB118
            pipeline = StableDiffusionPipeline(
                text_encoder=text_encoder,
                vae=vae,
                unet=unet,
                tokenizer=tokenizer,
                scheduler=PNDMScheduler(
                    beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True
                ),
                safety_checker=None,
                feature_extractor=None,
            )
            print(f'saving checkpoint to: {args.output_path}/{args.run_name}_{global_step}')
            pipeline.save_pretrained(f'{args.output_path}/{args.run_name}_{global_step}')
        # barrier
        torch.distributed.barrier()

    for epoch in range(args.epochs):
        unet.train()
        for _, batch in enumerate(train_dataloader):
            latents = vae.encode(batch['pixel_values'].to(device, dtype=weight_dtype)).latent_dist.sample()
            latents = latents * 0.18215

            noise = torch.randn_like(latents)
            bsz = latents.shape[0]
            timesteps = torch.randint(0, noise_scheduler.num_train_timesteps, (bsz,), device=latents.device).long()
            noisy_latents = noise_scheduler.add_noise(latents, noise, timesteps)

            encoder_hidden_states = text_encoder(batch['input_ids'].to(device)).last_hidden_state

            with torch.autocast('cuda', enabled=args.fp16):
                noise_pred = unet(noisy_latents, timesteps, encoder_hidden_states).sample

            loss = torch.nn.functional.mse_loss(noise_pred.float(), noise.float(), reduction="mean")

            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            lr_scheduler.step()
            optimizer.zero_grad()

            # Update EMA
            if args.use_ema:
                ema_unet.step(unet.parameters())

            global_step += 1
            if global_step % args.save_steps == 0:
                save_checkpoint(global_step)

    save_checkpoint(global_step)
