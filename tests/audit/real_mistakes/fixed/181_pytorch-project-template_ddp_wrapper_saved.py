# Reconstructed after ryul99/pytorch-project-template PR #7 ("DDP saving/loading hotfix", merged, https://github.com/ryul99/pytorch-project-template/pull/7): Model.save_network / save_training_state saved self.net.state_dict() of the DistributedDataParallel wrapper (keys prefixed "module."), and load_network / load_training_state called torch.load(path) without map_location, so every DDP rank deserialised the checkpoint onto the device it was saved from. The merged PR (commit 9c01b7d) saves net.module when wrapped in DDP and passes map_location=torch.device(self.device) to torch.load.
# Fixed version (the merged PR applied).
import os.path as osp
from collections import OrderedDict

import torch
from torch.nn.parallel import DistributedDataParallel as DDP


class Model:
    def __init__(self, hp, net_arch, loss_f, rank=0, world_size=1):
        self.hp = hp
        self.device = self.hp.model.device
        self.net = net_arch.to(self.device)
        self.rank = rank
        self.world_size = world_size
        if self.device != "cpu" and self.world_size != 0:
            self.net = DDP(self.net, device_ids=[self.rank])
        self.step = 0
        self.epoch = -1
        self.optimizer = torch.optim.Adam(self.net.parameters(), **self.hp.train.optimizer.adam)
        self.loss_f = loss_f

    def optimize_parameters(self, input, GT):
        self.net.train()
        self.optimizer.zero_grad()
        output = self.net(input.to(self.device))
        loss_v = self.loss_f(output, GT.to(self.device))
        loss_v.backward()
        self.optimizer.step()
        return loss_v.item()

    def save_network(self, logger):
        if self.rank == 0:
            save_path = osp.join(self.hp.log.chkpt_dir, "%s_%d.pt" % (self.hp.log.name, self.step))
            net = self.net.module if isinstance(self.net, DDP) else self.net
            state_dict = net.state_dict()  # not: TB???
            for key, param in state_dict.items():
                state_dict[key] = param.to("cpu")
            torch.save(state_dict, save_path)

    def load_network(self, loaded_net=None, logger=None):
        if loaded_net is None:
            loaded_net = torch.load(
                self.hp.load.network_chkpt_path, map_location=torch.device(self.device)  # not: TB???
            )
        loaded_clean_net = OrderedDict()  # remove unnecessary 'module.'
        for k, v in loaded_net.items():
            if k.startswith("module."):
                loaded_clean_net[k[7:]] = v
            else:
                loaded_clean_net[k] = v
        self.net.load_state_dict(loaded_clean_net, strict=self.hp.load.strict_load)

    def save_training_state(self, logger):
        if self.rank == 0:
            save_path = osp.join(self.hp.log.chkpt_dir, "%s_%d.state" % (self.hp.log.name, self.step))
            net = self.net.module if isinstance(self.net, DDP) else self.net
            net_state_dict = net.state_dict()
            for key, param in net_state_dict.items():
                net_state_dict[key] = param.to("cpu")
            state = {
                "model": net_state_dict,
                "optimizer": self.optimizer.state_dict(),
                "step": self.step,
                "epoch": self.epoch,
            }
            torch.save(state, save_path)

    def load_training_state(self, logger):
        resume_state = torch.load(
            self.hp.load.resume_state_path, map_location=torch.device(self.device)
        )
        self.load_network(loaded_net=resume_state["model"], logger=logger)
        self.optimizer.load_state_dict(resume_state["optimizer"])
        self.step = resume_state["step"]
        self.epoch = resume_state["epoch"]
