# Reconstructed after nikhilsinghmus/image2reverb issue #37 ("Is fake_spec.detach() in Generator training step intentional?", closed, https://github.com/nikhilsinghmus/image2reverb/issues/37): in Image2Reverb.training_step the generator/encoder branch (optimizer_idx 0 or 1) fed fake_spec.detach() to the discriminator, so the adversarial loss G_loss1 sent no gradient to the generator and only the L1 term trained it. The maintainer nikhilsinghmus replied that the .detach() "should not be there for the generator step and is a bug"; the fix is to pass fake_spec un-detached in the generator step (the detach stays in the discriminator step).
# Fixed version (the .detach() removed from the generator step, as the maintainer confirmed).
import torch
import torch.nn.functional as F
import pytorch_lightning as pl
from .networks import Encoder, Generator, Discriminator

G_LR = 4e-4
D_LR = 2e-4
ENC_LR = 1e-5
ADAM_BETA = (0.0, 0.99)
ADAM_EPS = 1e-8
LAMBDA = 100


class Image2Reverb(pl.LightningModule):
    def __init__(self, encoder_path, depthmodel_path, latent_dimension=512, d_threshold=0.2):
        super().__init__()
        self._latent_dimension = latent_dimension
        self._d_threshold = d_threshold
        self._opt = (d_threshold is not None) and (0 < d_threshold < 1)
        self.enc = Encoder(encoder_path, depthmodel_path)
        self.g = Generator(latent_dimension)
        self.d = Discriminator(365)

    def training_step(self, batch, batch_idx, optimizer_idx):
        opts = self.optimizers() if self._opt else None
        spec, label, p = batch
        spec.requires_grad = True

        f = self.enc.forward(label)[0]
        noise = torch.randn((f.shape[0], self._latent_dimension - f.shape[1], f.shape[2], f.shape[3]), device=self.device)
        z = torch.cat((f, noise), 1)
        fake_spec = self.g(z)
        d_fake = self.d(fake_spec.detach(), f)
        d_real = self.d(spec, f)

        # Train Generator or Encoder
        if optimizer_idx == 0 or optimizer_idx == 1:
            d_fake2 = self.d(fake_spec, f)  # not: TB???
            G_loss1 = F.mse_loss(d_fake2, torch.ones(d_fake2.shape, device=self.device))
            G_loss2 = F.l1_loss(fake_spec, spec)
            G_loss = G_loss1 + (LAMBDA * G_loss2)
            if self._opt:
                self.manual_backward(G_loss, opts[optimizer_idx])
                opts[optimizer_idx].step()
                opts[optimizer_idx].zero_grad()
            self.log("G", G_loss, on_step=True, on_epoch=True, prog_bar=True)
            return G_loss
        else:  # Train Discriminator
            l_fakeD = F.mse_loss(d_fake, torch.zeros(d_fake.shape, device=self.device))
            l_realD = F.mse_loss(d_real, torch.ones(d_real.shape, device=self.device))
            D_loss = l_realD + l_fakeD
            if self._opt and (D_loss > self._d_threshold):
                self.manual_backward(D_loss, opts[optimizer_idx])
                opts[optimizer_idx].step()
                opts[optimizer_idx].zero_grad()
            self.log("D", D_loss, on_step=True, on_epoch=True, prog_bar=True)
            return D_loss

    def configure_optimizers(self):
        g_optim = torch.optim.Adam(self.g.parameters(), lr=G_LR, betas=ADAM_BETA, eps=ADAM_EPS)
        d_optim = torch.optim.Adam(self.d.parameters(), lr=D_LR, betas=ADAM_BETA, eps=ADAM_EPS)
        enc_optim = torch.optim.Adam(self.enc.parameters(), lr=ENC_LR, betas=ADAM_BETA, eps=ADAM_EPS)
        return [enc_optim, g_optim, d_optim], []
