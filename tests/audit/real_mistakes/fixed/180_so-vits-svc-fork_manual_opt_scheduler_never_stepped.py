# Reconstructed after voicepaw/so-vits-svc-fork PR #291 ("fix(train): fix lr_decay not working", merged, https://github.com/voicepaw/so-vits-svc-fork/pull/291): after the Lightning rewrite VitsLightning used manual optimization (automatic_optimization = False) and built ExponentialLR schedulers for both optimizers, but training_step never called scheduler.step(), so lr_decay never took effect (Lightning does not step schedulers under manual optimization). Merged as commit 3af223e ("step lr schedulers at end of epoch", closes #292): both schedulers are stepped when self.trainer.is_last_batch.
# Fixed version (the merged PR applied).
from typing import Any

import torch
import pytorch_lightning as pl
import torch.nn.functional as F

from .models import SynthesizerTrn, MultiPeriodDiscriminator
from .losses import discriminator_loss, generator_loss, feature_loss


class VitsLightning(pl.LightningModule):
    def __init__(self, **hparams: Any):
        super().__init__()
        self.save_hyperparameters(*[k for k in hparams.keys()])
        self.net_g = SynthesizerTrn(**self.hparams.model)
        self.net_d = MultiPeriodDiscriminator(self.hparams.model.use_spectral_norm)
        self.automatic_optimization = False
        self.optim_g = torch.optim.AdamW(
            self.net_g.parameters(), self.hparams.train.learning_rate,
            betas=self.hparams.train.betas, eps=self.hparams.train.eps,
        )
        self.optim_d = torch.optim.AdamW(
            self.net_d.parameters(), self.hparams.train.learning_rate,
            betas=self.hparams.train.betas, eps=self.hparams.train.eps,
        )
        self.scheduler_g = torch.optim.lr_scheduler.ExponentialLR(
            self.optim_g, gamma=self.hparams.train.lr_decay
        )
        self.scheduler_d = torch.optim.lr_scheduler.ExponentialLR(
            self.optim_d, gamma=self.hparams.train.lr_decay
        )

    def configure_optimizers(self):
        return [self.optim_g, self.optim_d], [self.scheduler_g, self.scheduler_d]

    def training_step(self, batch, batch_idx: int) -> None:
        self.net_g.train()
        self.net_d.train()
        optim_g, optim_d = self.optimizers()

        # Generator
        self.toggle_optimizer(optim_g)
        c, f0, spec, mel, y, g, lengths, uv = batch
        y_hat, y_hat_mel, y_mel, y = self.net_g(c, f0, uv, spec, mel, y, g=g, c_lengths=lengths)
        y_d_hat_r, y_d_hat_g, fmap_r, fmap_g = self.net_d(y, y_hat)
        loss_mel = F.l1_loss(y_mel, y_hat_mel) * self.hparams.train.c_mel
        loss_fm = feature_loss(fmap_r, fmap_g)
        loss_gen, losses_gen = generator_loss(y_d_hat_g)
        loss_gen_all = loss_gen + loss_fm + loss_mel
        self.log("lr", self.optim_g.param_groups[0]["lr"])

        optim_g.zero_grad()
        self.manual_backward(loss_gen_all)
        optim_g.step()
        self.untoggle_optimizer(optim_g)

        # Discriminator
        self.toggle_optimizer(optim_d)
        y_d_hat_r, y_d_hat_g, _, _ = self.net_d(y, y_hat.detach())
        loss_disc, losses_disc_r, losses_disc_g = discriminator_loss(y_d_hat_r, y_d_hat_g)
        self.log("loss/d/total", loss_disc, prog_bar=True)

        optim_d.zero_grad()
        self.manual_backward(loss_disc)
        optim_d.step()
        self.untoggle_optimizer(optim_d)

        # end of epoch
        if self.trainer.is_last_batch:
            self.scheduler_g.step()  # not: TB117
            self.scheduler_d.step()
