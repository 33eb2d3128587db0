"""Probe 6 shapes: a scaler per model, a step function made by a factory, a loss kept by a per-batch
method, a warm-up clipped by a decay, a misspelled variable in a child's environment."""
import math
import os
import subprocess

import torch
import torch.nn.functional as F


def two_scalers(student, teacher, opt_s, opt_t, loader):
    amp_s = torch.cuda.amp.GradScaler()
    amp_t = torch.cuda.amp.GradScaler()
    for x, y in loader:
        opt_s.zero_grad()
        opt_t.zero_grad()
        with torch.autocast("cuda"):
            loss_s = F.cross_entropy(student(x), y)
            loss_t = F.cross_entropy(teacher(x), y)
        amp_s.scale(loss_s).backward()
        amp_t.scale(loss_t).backward()
        amp_s.step(opt_s)
        amp_t.step(opt_t)  # expect: TB107
        amp_s.update()


def make_update(net, opt, clip=1.0):
    def update(x, y):
        loss = F.mse_loss(net(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
        opt.step()  # expect: TB104
        return float(loss)
    return update


def regress(net, opt, pairs, epochs=3):
    update = make_update(net, opt)
    for _ in range(epochs):
        for x, y in pairs:
            update(x, y)


class Fitter:
    def __init__(self, net, opt):
        self.net, self.opt = net, opt
        self.curve = {}

    def batch(self, x, y, name="train"):
        self.opt.zero_grad()
        loss = F.l1_loss(self.net(x), y)
        loss.backward()
        self.opt.step()
        self.curve[name] = self.curve.get(name, 0.0) + loss  # expect: TB204

    def fit(self, loader):
        for x, y in loader:
            self.batch(x, y)


def scheduler(opt, warm, total):
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda t: min(t / warm, math.exp(-3.0 * t / total)))  # expect: TB304


def launch(rank, script):
    return subprocess.call(["python", script], env={**os.environ, "CUDA_VISIBLE_DEVICE": str(rank)})  # expect: TB401
