# Reconstructed after kan-bayashi/ParallelWaveGAN PR #26 ("Add torch.no_grad() in evaluation", merged,
# https://github.com/kan-bayashi/ParallelWaveGAN/pull/26): the Trainer's _eval_step() ran the generator and the
# discriminator on the dev set with autograd enabled (only .eval() was set), so every evaluation step built and
# held a backward graph -- "additional memory consuming in the evaluation".  The maintainer (kan-bayashi) fixed it
# in his own merged PR by decorating _eval_step with @torch.no_grad().
from collections import defaultdict

import torch
from tqdm import tqdm


class Trainer:
    def __init__(self, data_loader, model, criterion, optimizer, scheduler, config, device):
        self.data_loader = data_loader
        self.model = model  # {"generator": ..., "discriminator": ...}
        self.criterion = criterion  # {"stft": ..., "mse": ...}
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.config = config
        self.device = device
        self.steps = 0
        self.total_eval_loss = defaultdict(float)

    def _eval_step(self, batch):  # expect: TB203
        x, y = batch
        x = tuple(x_.to(self.device) for x_ in x)
        y = y.to(self.device)

        y_ = self.model["generator"](*x)
        p_ = self.model["discriminator"](y_)
        sc_loss, mag_loss = self.criterion["stft"](y_.squeeze(1), y.squeeze(1))
        aux_loss = sc_loss + mag_loss
        adv_loss = self.criterion["mse"](p_, p_.new_ones(p_.size()))
        gen_loss = aux_loss + self.config["lambda_adv"] * adv_loss

        p = self.model["discriminator"](y)
        real_loss = self.criterion["mse"](p, p.new_ones(p.size()))
        fake_loss = self.criterion["mse"](p_, p_.new_zeros(p_.size()))
        dis_loss = real_loss + fake_loss

        self.total_eval_loss["eval/spectral_convergence_loss"] += sc_loss.item()
        self.total_eval_loss["eval/log_stft_magnitude_loss"] += mag_loss.item()
        self.total_eval_loss["eval/generator_loss"] += gen_loss.item()
        self.total_eval_loss["eval/discriminator_loss"] += dis_loss.item()

    def _eval_epoch(self):
        for key in self.model.keys():
            self.model[key].eval()
        for eval_steps_per_epoch, batch in enumerate(tqdm(self.data_loader["dev"], desc="[eval]"), 1):
            self._eval_step(batch)
        for key in self.total_eval_loss.keys():
            self.total_eval_loss[key] /= eval_steps_per_epoch
            print(f"(Steps: {self.steps}) {key} = {self.total_eval_loss[key]:.4f}.")
        self.total_eval_loss = defaultdict(float)
        for key in self.model.keys():
            self.model[key].train()
