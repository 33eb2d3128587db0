# Reconstructed after IAHispano/Applio PR #860 ("optimizer step bugfix"): the GAN loop stepped both optimizers
# through the GradScaler and then called optim_g.step() and optim_d.step() again, applying still-scaled
# gradients a second time; the fix removes the two plain steps.
import torch


def train_one_epoch(net_g, net_d, optim_g, optim_d, loader, loss_disc_fn, loss_gen_fn, use_amp):
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    for spec, wave in loader:
        with torch.autocast("cuda", enabled=use_amp):
            y_hat = net_g(spec)
            y_d_hat_r, y_d_hat_g = net_d(wave, y_hat.detach())
            loss_disc = loss_disc_fn(y_d_hat_r, y_d_hat_g)
        optim_d.zero_grad()
        scaler.scale(loss_disc).backward()
        scaler.unscale_(optim_d)
        torch.nn.utils.clip_grad_norm_(net_d.parameters(), 1000.0)
        scaler.step(optim_d)
        with torch.autocast("cuda", enabled=use_amp):
            _, y_d_hat_g = net_d(wave, y_hat)
            loss_gen = loss_gen_fn(y_d_hat_g)
        optim_g.zero_grad()
        scaler.scale(loss_gen).backward()
        scaler.unscale_(optim_g)
        torch.nn.utils.clip_grad_norm_(net_g.parameters(), 1000.0)
        scaler.step(optim_g)
        scaler.update()
        optim_g.step()  # expect: TB112
        optim_d.step()  # expect: TB112
