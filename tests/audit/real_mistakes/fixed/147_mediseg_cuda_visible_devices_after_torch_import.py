# Fixed version of ../147_mediseg_cuda_visible_devices_after_torch_import.py: silent on the codes that file expects.
import os
import sys

if __name__ == "__main__" and "--gpus" in sys.argv:
    os.environ["CUDA_VISIBLE_DEVICES"] = sys.argv[sys.argv.index("--gpus") + 1]  # not: TB402

import random  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402


class NetworkTrainer:
    def __init__(self, opt):
        self.opt = opt
        self.criterion = torch.nn.CrossEntropyLoss()

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
    trainer.set_randomseed()
    trainer.set_network(net)
    trainer.set_optimizer()
    trainer.set_dataloader(train_set)
    trainer.run()
