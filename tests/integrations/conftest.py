"""Shared pieces of the adapter tests: a tiny classification problem, a LightningModule that trains on it, and the
same run through trickbag's own Trainer (the independent reference)."""

from __future__ import annotations

import copy
import os
import warnings
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)
warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*LightningModule.*")


def data(n: int = 40, dim: int = 6, classes: int = 3, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, dim, generator=g)  # [C, L] samples: mix needs a channel dimension
    y = torch.randint(0, classes, (n,), generator=g)
    return TensorDataset(x, y)


def loader(ds: Any, batch_size: int = 8, seed: int | None = None, **kw: Any) -> DataLoader:
    """In order (the equality tests), or shuffled with its own generator seeded ``seed``."""
    if seed is None:
        return DataLoader(ds, batch_size=batch_size, shuffle=False, **kw)
    return DataLoader(ds, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed), **kw)


def net(seed: int = 0, dim: int = 6, classes: int = 3) -> torch.nn.Module:
    torch.manual_seed(seed)
    nn = torch.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                         nn.Linear(16, classes))


@pytest.fixture
def lit() -> Any:
    """``lit(model, opt_fn, use_loss=...)``: a LightningModule around ``model``."""
    import lightning.pytorch as pl

    class Module(pl.LightningModule):
        def __init__(self, model: torch.nn.Module, opt_fn: Any, use_loss: bool, sched_fn: Any = None) -> None:
            super().__init__()
            self.model, self.opt_fn, self.use_loss, self.sched_fn = model, opt_fn, use_loss, sched_fn
            self.val_weights: list[torch.Tensor] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            out = self(x)
            if self.use_loss:
                return self.trickbag_loss(out, y)
            return torch.nn.functional.cross_entropy(out, y)

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            if batch_idx == 0:
                self.val_weights.append(torch.cat([p.detach().flatten().clone() for p in self.model.parameters()]))
            self.log("val_loss", torch.nn.functional.cross_entropy(self(batch[0]), batch[1]))

        def configure_optimizers(self) -> Any:
            opt = self.opt_fn(self.model.parameters())
            return opt if self.sched_fn is None else {"optimizer": opt, "lr_scheduler": self.sched_fn(opt)}

    def make(model: torch.nn.Module, opt_fn: Any, *, use_loss: bool = False, sched_fn: Any = None) -> Any:
        return Module(model, opt_fn, use_loss, sched_fn)

    return make


def lightning_fit(module: Any, train: Any, val: Any = None, *, callbacks: list[Any], epochs: int = 2,
                  **kw: Any) -> Any:
    import lightning.pytorch as pl

    trainer = pl.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=kw.pop("enable_checkpointing", False), enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0, callbacks=callbacks,
                         deterministic=False, **kw)
    trainer.fit(module, train, val)
    return trainer


class Holder(torch.nn.Module):
    """The reference's model: the net under the name ``model``, so that parameter names (which freeze, layer_decay
    and param_groups match) are the LightningModule's."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def clone(model: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(model)
