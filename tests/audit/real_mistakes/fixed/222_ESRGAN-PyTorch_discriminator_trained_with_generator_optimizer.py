# Reconstructed after Lornatang/ESRGAN-PyTorch issue #39 ("a small bug in train_gan.py ?", closed-as-fixed, https://github.com/Lornatang/ESRGAN-PyTorch/issues/39), fixed by the maintainer in commit 0b0c7d4 ("Closes #39"): main() in train_gan.py passed g_optimizer twice to train(...), once as g_optimizer and once in the d_optimizer slot, so the discriminator update scaler.step(d_optimizer) actually stepped the generator's Adam (on the generator grads left from the G step) while the discriminator's own optimizer was never stepped and D stayed at its pretrained weights; d_scheduler and the saved d_optimizer state were for an optimizer that never ran. The fix passes d_optimizer as the ninth argument.
# Fixed version (the maintainer's fix commit applied).
from typing import Any

import torch
from torch import nn, optim
from torch.cuda import amp

from train_helpers import load_dataset, build_model, define_loss, define_optimizer, define_scheduler
from test import test
from utils import build_iqa_model, save_checkpoint


def main(config: Any):
    scaler = amp.GradScaler()
    start_epoch = 0
    device = torch.device("cuda", config["DEVICE_ID"])

    train_data_prefetcher, paired_test_data_prefetcher = load_dataset(config, device)
    g_model, ema_g_model, d_model = build_model(config, device)
    pixel_criterion, feature_criterion, adversarial_criterion = define_loss(config, device)
    g_optimizer, d_optimizer = define_optimizer(g_model, d_model, config)
    g_scheduler, d_scheduler = define_scheduler(g_optimizer, d_optimizer, config)
    psnr_model, ssim_model = build_iqa_model(config["SCALE"], config["TEST"]["ONLY_TEST_Y_CHANNEL"], device)

    for epoch in range(start_epoch, config["TRAIN"]["HYP"]["EPOCHS"]):
        train(g_model,
              ema_g_model,
              d_model,
              train_data_prefetcher,
              pixel_criterion,
              feature_criterion,
              adversarial_criterion,
              g_optimizer,
              d_optimizer,  # not: TB???
              epoch,
              scaler,
              device,
              config)

        g_scheduler.step()
        d_scheduler.step()

        psnr, ssim = test(g_model, paired_test_data_prefetcher, psnr_model, ssim_model, device, config)

        save_checkpoint({"epoch": epoch + 1,
                         "state_dict": g_model.state_dict(),
                         "ema_state_dict": ema_g_model.state_dict() if ema_g_model is not None else None,
                         "optimizer": g_optimizer.state_dict()},
                        f"g_epoch_{epoch + 1}.pth.tar")
        save_checkpoint({"epoch": epoch + 1,
                         "state_dict": d_model.state_dict(),
                         "optimizer": d_optimizer.state_dict()},
                        f"d_epoch_{epoch + 1}.pth.tar")


def train(
        g_model: nn.Module,
        ema_g_model: nn.Module,
        d_model: nn.Module,
        train_data_prefetcher,
        pixel_criterion: nn.L1Loss,
        content_criterion: nn.Module,
        adversarial_criterion: nn.BCEWithLogitsLoss,
        g_optimizer: optim.Adam,
        d_optimizer: optim.Adam,
        epoch: int,
        scaler: amp.GradScaler,
        device: torch.device,
        config: Any,
) -> None:
    g_model.train()
    d_model.train()

    train_data_prefetcher.reset()
    batch_data = train_data_prefetcher.next()
    batch_size = batch_data["gt"].shape[0]
    real_label = torch.full([batch_size, 1], 1.0, dtype=torch.float, device=device)
    fake_label = torch.full([batch_size, 1], 0.0, dtype=torch.float, device=device)

    while batch_data is not None:
        gt = batch_data["gt"].to(device, non_blocking=True)
        lr = batch_data["lr"].to(device, non_blocking=True)

        for d_parameters in d_model.parameters():
            d_parameters.requires_grad = False

        g_model.zero_grad(set_to_none=True)
        with amp.autocast():
            sr = g_model(lr)
            gt_output = d_model(gt.detach().clone())
            sr_output = d_model(sr)
            pixel_loss = pixel_criterion(sr, gt)
            content_loss = content_criterion(sr, gt)
            d_loss_gt = adversarial_criterion(gt_output - torch.mean(sr_output), fake_label) * 0.5
            d_loss_sr = adversarial_criterion(sr_output - torch.mean(gt_output), real_label) * 0.5
            g_loss = pixel_loss + content_loss + 0.005 * (d_loss_gt + d_loss_sr)
        scaler.scale(g_loss).backward()
        scaler.step(g_optimizer)
        scaler.update()

        for d_parameters in d_model.parameters():
            d_parameters.requires_grad = True

        d_model.zero_grad(set_to_none=True)
        with amp.autocast():
            gt_output = d_model(gt)
            sr_output = d_model(sr.detach().clone())
            d_loss_gt = adversarial_criterion(gt_output - torch.mean(sr_output), real_label) * 0.5
        scaler.scale(d_loss_gt).backward(retain_graph=True)
        with amp.autocast():
            sr_output = d_model(sr.detach().clone())
            d_loss_sr = adversarial_criterion(sr_output - torch.mean(gt_output), fake_label) * 0.5
        scaler.scale(d_loss_sr).backward()
        scaler.step(d_optimizer)
        scaler.update()

        if config["MODEL"]["EMA"]["ENABLE"]:
            ema_g_model.update_parameters(g_model)

        batch_data = train_data_prefetcher.next()
