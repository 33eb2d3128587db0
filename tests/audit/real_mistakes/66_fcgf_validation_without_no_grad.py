# Reconstructed after chrischoy/FCGF issue #15 ("when performing the validation you can wrap the code in with
# torch.no_grad() ... It helps reduce the memory consumption and makes the validation faster"; the maintainer:
# "Thanks for the issue. Yes, I'll update the evaluation codes."): the trainer's _valid_epoch ran the feature
# network on every validation pair with gradients enabled.
import numpy as np


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
        for input_dict in self.val_data_loader:
            F0 = self.model(input_dict["sinput0"].to(self.device)).F  # expect: TB203
            F1 = self.model(input_dict["sinput1"].to(self.device)).F
            hit_ratios.append(self.evaluate_hit_ratio(F0, F1, input_dict["correspondences"]))
        return np.mean(hit_ratios)

    def evaluate_hit_ratio(self, F0, F1, pairs):
        return float((F0[pairs[:, 0]] - F1[pairs[:, 1]]).norm(dim=1).lt(0.1).float().mean())
