# Reconstructed after krisrs1128/glacier_mapping PR #29 ("Save state_dict()",
# https://github.com/krisrs1128/glacier_mapping/pull/29): the segmentation Framework's save() wrote the checkpoint
# with torch.save(self.model, ...), so "model_245.pt" held the whole pickled model object, not just its state dict,
# and loading it needed the exact class/module layout of the training code.  The repository owner (krisrs1128)
# opened and merged the PR, which saves self.model.state_dict() instead.
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
        torch.save(self.model, model_path)  # expect: TB404
        torch.save(self.optimizer.state_dict(), optim_path)
        print(f"Saved model {epoch}")

    def load_state_dict(self, state_dict):
        self.model.load_state_dict(state_dict)
