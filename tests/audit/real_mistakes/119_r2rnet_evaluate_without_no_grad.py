# Reconstructed after JianghaiSCU/R2RNet PR #1 ("Updated model.evaluate()": "Save CUDA memory when evaluating",
# merged): the network's evaluate() method, run on the evaluation images every few epochs of train(), ran its
# forward passes with autograd on.
import numpy as np
import torch
import torch.nn as nn


class R2RNet(nn.Module):
    def __init__(self, decom, denoise, relight):
        super().__init__()
        self.decom, self.denoise, self.relight = decom, denoise, relight

    def forward(self, low, high):
        r_low, i_low = self.decom(low)
        r_high, i_high = self.decom(high)
        r_den = self.denoise(r_low)
        i_rel = self.relight(r_den, i_low)
        return r_den * i_rel, r_high * i_high

    def evaluate(self, epoch, eval_low, eval_high, vis_dir):
        self.eval()
        psnrs = []
        for low, high in zip(eval_low, eval_high):
            out, ref = self.forward(low, high)  # expect: TB203
            mse = ((out - ref) ** 2).mean().item()
            psnrs.append(10 * np.log10(1.0 / max(mse, 1e-10)))
        self.train()
        return float(np.mean(psnrs))

    def train_model(self, loader, optimizer, epochs, eval_every, eval_low, eval_high, vis_dir):
        self.train()
        for epoch in range(epochs):
            for low, high in loader:
                optimizer.zero_grad()
                out, ref = self.forward(low, high)
                loss = torch.abs(out - high).mean()
                loss.backward()
                optimizer.step()
            if epoch % eval_every == 0:
                self.evaluate(epoch, eval_low, eval_high, vis_dir)
