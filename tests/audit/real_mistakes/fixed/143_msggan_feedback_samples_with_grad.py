# Fixed version of ../143_msggan_feedback_samples_with_grad.py: silent on the codes that file expects.
import os
import timeit

import torch as th


class MSG_GAN:
    def __init__(self, gen, dis, latent_size, device):
        self.gen, self.dis = gen, dis
        self.latent_size, self.device = latent_size, device

    def create_grid(self, samples, img_files):
        for sample, img_file in zip(samples, img_files):
            th.save(sample.detach().cpu(), img_file)

    def optimize_step(self, dis_optim, gen_optim, noise, real_batch, loss_fn):
        fake = self.gen(noise)
        dis_loss = loss_fn.dis_loss(real_batch, [f.detach() for f in fake])
        dis_optim.zero_grad()
        dis_loss.backward()
        dis_optim.step()
        gen_loss = loss_fn.gen_loss(real_batch, self.gen(noise))
        gen_optim.zero_grad()
        gen_loss.backward()
        gen_optim.step()
        return dis_loss.item(), gen_loss.item()

    def train(self, data, gen_optim, dis_optim, loss_fn, num_epochs, feedback_factor, sample_dir):
        fixed_input = th.randn(16, self.latent_size).to(self.device)
        for epoch in range(1, num_epochs + 1):
            start = timeit.default_timer()
            limit = len(data)
            for i, batch in enumerate(data, 1):
                images = batch.to(self.device)
                noise = th.randn(images.shape[0], self.latent_size).to(self.device)
                dis_loss, gen_loss = self.optimize_step(dis_optim, gen_optim, noise, [images], loss_fn)
                if i % int(limit / feedback_factor) == 0 or i == 1:
                    print("Epoch: %d batch: %d d_loss: %f g_loss: %f" % (epoch, i, dis_loss, gen_loss))
                    os.makedirs(sample_dir, exist_ok=True)
                    gen_img_files = [os.path.join(sample_dir, "gen_%d_%d_%d.pt" % (s, epoch, i)) for s in range(4)]
                    with th.no_grad():
                        self.create_grid(self.gen(fixed_input), gen_img_files)  # not: TB203
            stop = timeit.default_timer()
            print("Time taken for epoch: %.3f secs" % (stop - start))
