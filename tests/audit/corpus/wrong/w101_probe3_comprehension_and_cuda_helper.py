import os

import torch


def least_used_gpu():
    usage = [torch.cuda.utilization(i) for i in range(torch.cuda.device_count())]
    return usage.index(min(usage))


def configure():
    gpu = least_used_gpu()
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)  # expect: TB402


class Runner:
    def __init__(self, model, lr=3e-4):
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def update(self, x, y):
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.opt.step()  # expect: TB104
        return loss.detach()

    def epoch(self, loader):
        return torch.stack([self.update(x, y) for x, y in loader]).mean()
