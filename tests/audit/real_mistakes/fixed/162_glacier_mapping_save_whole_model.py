# Fixed version of ../162_glacier_mapping_save_whole_model.py: silent on the codes that file expects.
from pathlib import Path

import torch


class Framework:
    def __init__(self, model, loss_fn, optimizer_opts=None, reg_opts=None, device=None):
        self.device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = model.to(self.device)
        self.loss_fn = loss_fn
        opts = optimizer_opts or {"name": "Adam", "args": {"lr": 1e-3}}
        optimizer_def = getattr(torch.optim, opts["name"])
        self.optimizer = optimizer_def(self.model.parameters(), **opts["args"])
        self.lrscheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(self.optimizer, "min", patience=5)
        self.reg_opts = reg_opts or {}

    def optimize(self, x, y):
        x, y = x.to(self.device), y.to(self.device)
        self.optimizer.zero_grad()
        y_hat = self.model(x)
        loss = self.loss_fn(y_hat, y)
        loss.backward()
        self.optimizer.step()
        return y_hat, loss

    def val_operations(self, val_loss):
        self.lrscheduler.step(val_loss)

    def save(self, out_dir, epoch):
        model_path = Path(out_dir, f"model_{epoch}.pt")
        optim_path = Path(out_dir, f"optim_{epoch}.pt")
        torch.save(self.model.state_dict(), model_path)  # not: TB404
        torch.save(self.optimizer.state_dict(), optim_path)
        print(f"Saved model {epoch}")

    def load_state_dict(self, state_dict):
        self.model.load_state_dict(state_dict)
