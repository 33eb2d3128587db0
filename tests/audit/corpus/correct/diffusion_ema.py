"""Diffusion-style training: EMA after the step, accelerate accumulation, sampling under no_grad (correct)."""
import copy

import torch
import torch.nn.functional as F


@torch.no_grad()
def update_ema(ema_model, model, decay=0.9999):
    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
        ema_p.mul_(decay).add_(p.detach(), alpha=1 - decay)


@torch.no_grad()
def sample(unet, scheduler, shape, steps=50):
    unet.eval()
    x = torch.randn(shape)
    for t in scheduler.timesteps[:steps]:
        x = scheduler.step(unet(x, t), t, x).prev_sample
    unet.train()
    return x


def train(unet, noise_scheduler, dataloader, accelerator, epochs=10):
    ema_unet = copy.deepcopy(unet)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
    unet, optimizer, dataloader = accelerator.prepare(unet, optimizer, dataloader)
    for epoch in range(epochs):
        unet.train()
        for batch in dataloader:
            with accelerator.accumulate(unet):
                noise = torch.randn_like(batch)
                t = torch.randint(0, 1000, (batch.size(0),))
                noisy = noise_scheduler.add_noise(batch, noise, t)
                loss = F.mse_loss(unet(noisy, t), noise)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                update_ema(ema_unet, unet)
        sample(ema_unet, noise_scheduler, (4, 3, 32, 32))
