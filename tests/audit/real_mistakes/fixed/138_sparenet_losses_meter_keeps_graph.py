# Fixed version of ../138_sparenet_losses_meter_keeps_graph.py: silent on the codes that file expects.
import torch


class AverageMeter:
    def __init__(self, items):
        self.items = items
        self.reset()

    def reset(self):
        self._val = [0] * len(self.items)
        self._sum = [0] * len(self.items)
        self._count = [0] * len(self.items)

    def update(self, values):
        for idx, v in enumerate(values):
            self._val[idx] = v
            self._sum[idx] += v
            self._count[idx] += 1

    def avg(self, idx):
        return self._sum[idx] / self._count[idx]


class SparenetRunner:
    def __init__(self, models, optimizers, chamfer_dist_mean, device):
        self.models, self.optimizers = models, optimizers
        self.chamfer_dist_mean, self.device = chamfer_dist_mean, device
        self.losses = AverageMeter(["CoarseLoss", "RefineLoss"])
        self.test_losses = AverageMeter(["CoarseLoss", "RefineLoss"])
        self.loss = {}

    def completion(self, data):
        coarse, middle, refine, expansion_penalty = self.models(data)
        coarse_loss = self.chamfer_dist_mean(coarse, data["gtcloud"]).mean()
        middle_loss = self.chamfer_dist_mean(middle, data["gtcloud"]).mean()
        refine_loss = self.chamfer_dist_mean(refine, data["gtcloud"]).mean()
        _loss = coarse_loss + middle_loss + refine_loss + expansion_penalty.mean() * 0.1
        return _loss, refine, refine_loss, coarse_loss

    def train_step(self, data):
        data = {k: v.float().to(self.device) for k, v in data.items()}
        _loss, _, refine_loss, coarse_loss = self.completion(data)
        self.models.zero_grad()
        _loss.backward()
        self.optimizers.step()
        self.loss["rec_loss"] = _loss.item()
        self.losses.update([coarse_loss.item() * 1000, refine_loss.item() * 1000])  # not: TB204

    def val_step(self, data):
        with torch.no_grad():
            _, refine, refine_loss, coarse_loss = self.completion(data)
        self.test_losses.update([coarse_loss.item() * 1000, refine_loss.item() * 1000])
        return refine
