# Fixed version of ../163_pix2pix_pytorch_save_whole_nets.py: silent on the codes that file expects.
import os

import torch
import torch.nn as nn


def train(epoch, netG, netD, optimizerG, optimizerD, training_data_loader, criterionGAN, criterionL1, opt, device):
    for iteration, batch in enumerate(training_data_loader, 1):
        real_a, real_b = batch[0].to(device), batch[1].to(device)
        fake_b = netG(real_a)

        optimizerD.zero_grad()
        pred_fake = netD(torch.cat((real_a, fake_b), 1).detach())
        loss_d_fake = criterionGAN(pred_fake, torch.zeros_like(pred_fake))
        pred_real = netD(torch.cat((real_a, real_b), 1))
        loss_d_real = criterionGAN(pred_real, torch.ones_like(pred_real))
        loss_d = (loss_d_fake + loss_d_real) * 0.5
        loss_d.backward()
        optimizerD.step()

        optimizerG.zero_grad()
        pred_fake = netD(torch.cat((real_a, fake_b), 1))
        loss_g_gan = criterionGAN(pred_fake, torch.ones_like(pred_fake))
        loss_g_l1 = criterionL1(fake_b, real_b) * opt.lamb
        loss_g = loss_g_gan + loss_g_l1
        loss_g.backward()
        optimizerG.step()

        print(f"===> Epoch[{epoch}]({iteration}/{len(training_data_loader)}): "
              f"Loss_D: {loss_d.item():.4f} Loss_G: {loss_g.item():.4f}")


def checkpoint(epoch, netG, netD, opt):
    out_dir = os.path.join("checkpoint", opt.dataset)
    os.makedirs(out_dir, exist_ok=True)
    for tag, net in (("netG", netG), ("netD", netD)):
        path = os.path.join(out_dir, f"{tag}_model_epoch_{epoch}.pth")
        torch.save(net.state_dict(), path)  # not: TB404
    print(f"Checkpoint saved to {out_dir}")


def main(opt, netG, netD, training_data_loader, device):
    criterionGAN = nn.BCEWithLogitsLoss()
    criterionL1 = nn.L1Loss()
    optimizerG = torch.optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerD = torch.optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    for epoch in range(1, opt.nEpochs + 1):
        train(epoch, netG, netD, optimizerG, optimizerD, training_data_loader, criterionGAN, criterionL1, opt, device)
        if epoch % 50 == 0:
            checkpoint(epoch, netG, netD, opt)
