# Reconstructed after sunsmarterjie/SDL-Skeleton PR #7 ("Fix gpu memory leak in trainer_AdaLSN.py", merged, https://github.com/sunsmarterjie/SDL-Skeleton/pull/7; issue #6): Trainer.train emulated an iter_size-batch step by appending every micro-batch loss tensor (with its whole autograd graph) to a list and calling backward once on torch.mean(torch.cat(losses)), so iter_size forward graphs stayed alive at once and GPU memory blew up. The merged fix (commit e0d95c2, merged by the maintainer) divides each micro-batch loss by iter_size and calls loss.backward() immediately, with zero_grad() before the loop and after each optimizer.step().
# Fixed version (the merged PR applied).
import logging
import time

import numpy as np
import torch


class Trainer(object):
    def __init__(self, network, optimizer, dataloader, args):
        self.args = args
        self.network = network
        self.optimizer = optimizer
        self.dataloader = dataloader
        self.timeformat = '%Y-%m-%d %H:%M:%S'

    def train(self):
        lossAcc = 0.0
        lossFuse = 0.0
        self.network.eval()  # if backbone has BN layers, freeze them
        dataiter = iter(self.dataloader)
        self.optimizer.zero_grad()
        for step in range(self.args.resume_iter, self.args.max_step):
            for _ in range(self.args.iter_size):
                try:
                    data, target = next(dataiter)
                except StopIteration:
                    dataiter = iter(self.dataloader)
                    data, target = next(dataiter)

                data, target = data.cuda(self.args.gpu_id), target.cuda(self.args.gpu_id)

                loss, fuse_loss = self.network(data, target)
                if np.isnan(float(loss.item())):
                    raise ValueError('loss is nan while training')
                loss /= self.args.iter_size
                loss.backward()  # not: TB204
                lossAcc += loss.item()
                lossFuse += fuse_loss.item()

            self.optimizer.step()
            self.optimizer.zero_grad()

            if (step > 0) and (step % self.args.lr_step) == 0:
                self.adjustLR()

            if (step + 1) % self.args.disp_interval == 0:
                logging.info('{} iter={} totloss={:<8.2f} fuseloss={:<8.2f}'.format(
                    time.strftime(self.timeformat, time.localtime()), step + 1,
                    lossAcc / self.args.disp_interval,
                    lossFuse / self.args.disp_interval / self.args.iter_size))
                lossAcc = 0.0
                lossFuse = 0.0

    def adjustLR(self):
        for param_group in self.optimizer.param_groups:
            param_group['lr'] *= self.args.lr_gamma
