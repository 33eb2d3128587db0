# Fixed version of ../66_fcgf_validation_without_no_grad.py: silent on the codes that file expects.
import numpy as np
import torch


class ContrastiveLossTrainer:
    def __init__(self, model, optimizer, data_loader, val_data_loader, device):
        self.model = model
        self.optimizer = optimizer
        self.data_loader = data_loader
        self.val_data_loader = val_data_loader
        self.device = device

    def _train_epoch(self, epoch):
        self.model.train()
        for input_dict in self.data_loader:
            self.optimizer.zero_grad()
            loss = self.model(input_dict["sinput0"]).pow(2).mean()
            loss.backward()
            self.optimizer.step()

    def _valid_epoch(self):
        self.model.eval()
        hit_ratios = []
        with torch.no_grad():
            for input_dict in self.val_data_loader:
                F0 = self.model(input_dict["sinput0"].to(self.device)).F  # not: TB203
                F1 = self.model(input_dict["sinput1"].to(self.device)).F
                hit_ratios.append(self.evaluate_hit_ratio(F0, F1, input_dict["correspondences"]))
        return np.mean(hit_ratios)

    def evaluate_hit_ratio(self, F0, F1, pairs):
        return float((F0[pairs[:, 0]] - F1[pairs[:, 1]]).norm(dim=1).lt(0.1).float().mean())
