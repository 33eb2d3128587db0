"""WGAN-GP: two optimizers, n_critic critic steps per generator step, gradient penalty (correct)."""
import torch
from torch import nn

from trickbag import gradient_penalty


def train_gan(generator, critic, loader, z_dim=64, n_critic=5, lambda_gp=10.0, epochs=10):
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4, betas=(0.0, 0.9))
    opt_d = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
    for epoch in range(epochs):
        for i, (real, _) in enumerate(loader):
            z = torch.randn(real.size(0), z_dim)
            with torch.no_grad():
                fake = generator(z)
            opt_d.zero_grad()
            eps = torch.rand(real.size(0), 1, 1, 1)
            x_hat = (eps * real + (1 - eps) * fake).requires_grad_(True)
            grad = torch.autograd.grad(critic(x_hat).sum(), x_hat, create_graph=True)[0]
            gp = ((grad.flatten(1).norm(dim=1) - 1) ** 2).mean()
            d_loss = critic(fake).mean() - critic(real).mean() + lambda_gp * gp
            d_loss.backward()
            opt_d.step()
            if i % n_critic == 0:
                opt_g.zero_grad()
                g_loss = -critic(generator(z)).mean()
                g_loss.backward()
                opt_g.step()


def dcgan_step(netG, netD, real, optimizerD, optimizerG, criterion, noise):
    netD.zero_grad()
    label = torch.ones(real.size(0))
    errD_real = criterion(netD(real).view(-1), label)
    errD_real.backward()
    fake = netG(noise)
    errD_fake = criterion(netD(fake.detach()).view(-1), torch.zeros_like(label))
    errD_fake.backward()
    optimizerD.step()
    netG.zero_grad()
    errG = criterion(netD(fake).view(-1), label)
    errG.backward()
    optimizerG.step()
    return errD_real.item() + errD_fake.item(), errG.item()


def train_dcgan(netG, netD, loader, optimizerD, optimizerG, criterion, nz=100):
    for epoch in range(5):
        for real, _ in loader:
            noise = torch.randn(real.size(0), nz, 1, 1)
            d, g = dcgan_step(netG, netD, real, optimizerD, optimizerG, criterion, noise)
        penalty = trickbag_gp(netD, real, netG(noise).detach())
        print(penalty.item())


def trickbag_gp(critic, real, fake):
    return gradient_penalty(critic, real, fake, generator=torch.Generator().manual_seed(0))
