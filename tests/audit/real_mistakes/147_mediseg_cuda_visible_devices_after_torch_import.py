# Reconstructed after hust-linyi/MedISeg issue #9 ("NetworkTrainer/train.py set_GPU_device",
# https://github.com/hust-linyi/MedISeg/issues/9): train.py imported NetworkTrainer (whose module imports torch and
# the networks) and only afterwards called trainer.set_GPU_device(), which writes os.environ['CUDA_VISIBLE_DEVICES'];
# by then torch was already imported, so the process used every GPU on the server instead of the chosen ids.  The
# maintainers answered "Thanks Xiaofang for the report" and "Fixed, thanks."; the fixed file below selects the GPUs
# before torch is first imported (the exact shape of the upstream fix is reconstructed, not copied).
import os
import random

import numpy as np
import torch
from torch.utils.data import DataLoader


class NetworkTrainer:
    def __init__(self, opt):
        self.opt = opt
        self.criterion = torch.nn.CrossEntropyLoss()

    def set_GPU_device(self):
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(x) for x in self.opt.train["gpus"])  # expect: TB402

    def set_randomseed(self):
        num = self.opt.train["seed"]
        random.seed(num)
        np.random.seed(num)
        torch.manual_seed(num)
        torch.cuda.manual_seed_all(num)

    def set_network(self, net: torch.nn.Module):
        self.net = torch.nn.DataParallel(net).cuda()

    def set_optimizer(self):
        self.optimizer = torch.optim.Adam(self.net.parameters(), self.opt.train["lr"], betas=(0.9, 0.99))
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=self.opt.train["train_epochs"])

    def set_dataloader(self, train_set):
        self.train_loader = DataLoader(train_set, batch_size=self.opt.train["batch_size"], shuffle=True)

    def train(self):
        self.net.train()
        for sampled_batch in self.train_loader:
            volume_batch, label_batch = sampled_batch["image"].cuda(), sampled_batch["label"].cuda()
            outputs = self.net(volume_batch)
            loss = self.criterion(outputs, label_batch)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def run(self):
        for epoch in range(self.opt.train["start_epoch"], self.opt.train["train_epochs"]):
            self.train()
            self.scheduler.step()


def main(opt, net, train_set):
    trainer = NetworkTrainer(opt)
    trainer.set_GPU_device()
    trainer.set_randomseed()
    trainer.set_network(net)
    trainer.set_optimizer()
    trainer.set_dataloader(train_set)
    trainer.run()
