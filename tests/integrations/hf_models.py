"""Tiny models, data and runs shared by the HF adapter's tests and its subprocess scripts (nothing downloaded)."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

LR = 0.01


class Net(nn.Module):
    """A small classifier on [2, 4, 4] images, as trickbag's Trainer calls it: ``model(x) -> logits``."""

    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.blocks = nn.Sequential(nn.Flatten(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 16),
                                    nn.ReLU())
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


class HFNet(Net):
    """The same network as an HF model sees it: ``model(pixel_values=..., labels=...) -> {"loss", "logits"}``; its
    loss honours ``num_items_in_batch`` (a sum over the update's count), as HF's own models do."""

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None,  # type: ignore[override]
                **kwargs: Any) -> dict[str, torch.Tensor]:
        logits = super().forward(pixel_values)
        if labels is None:
            return {"logits": logits}
        n = kwargs.get("num_items_in_batch")
        loss = nn.functional.cross_entropy(logits, labels, reduction="sum" if n is not None else "mean")
        return {"loss": loss / n if n is not None else loss, "logits": logits}


class Res(nn.Module):
    """A residual block, ``x + branch(x)`` (what drop_path drops)."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.branch = nn.Sequential(nn.Linear(width, width), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch(x)


class ResNet(Net):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(nn.Flatten(), nn.Linear(32, 16), nn.ReLU(), Res(), Res())


class HFResNet(ResNet, HFNet):
    """:class:`ResNet` as an HF model sees it."""


def data(n: int = 44, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, 4, 4, generator=g)
    return x, (x[:, 0, 0, :3].sum(1) > 0).long() + (x[:, 1, 0, 0] > 1).long()


def hf_dataset(x: torch.Tensor, y: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    return [{"pixel_values": x[i], "labels": y[i]} for i in range(len(x))]


def hf_args(out: str, **kw: Any) -> Any:
    from transformers import TrainingArguments

    base = dict(output_dir=out, per_device_train_batch_size=8, num_train_epochs=2, learning_rate=LR,
                lr_scheduler_type="constant", weight_decay=0.0, max_grad_norm=0.0, optim="adamw_torch",
                train_sampling_strategy="sequential", seed=0, report_to=[], disable_tqdm=True, use_cpu=True,
                save_strategy="no", logging_strategy="no", dataloader_num_workers=0)
    return TrainingArguments(**{**base, **kw})


def run_hf(tricks: dict[str, Any], out: str, *, model: nn.Module | None = None, n: int = 44, nonfinite: Any = None,
           **kw: Any) -> nn.Module:
    from trickbag.integrations.hf import TricksCallback, TricksTrainer

    torch.manual_seed(0)
    model = model if model is not None else HFNet()
    x, y = data(n)
    trainer = TricksTrainer(model=model, args=hf_args(out, **kw), train_dataset=hf_dataset(x, y),
                            callbacks=[TricksCallback(tricks, nonfinite=nonfinite)])
    trainer.train()
    return model


def run_reference(tricks: dict[str, Any], *, n: int = 44, epochs: int = 2, accumulate: int = 1,
                  clip: Any = None, weight_decay: float = 0.0, scheduler: Any = None, residual: bool = False,
                  device: str = "cpu", **trainer_kw: Any) -> nn.Module:
    """trickbag's own Trainer on the same network, initial weights, data order and seed."""
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.train.trainer import Trainer

    torch.manual_seed(0)
    hf = HFResNet() if residual else HFNet()
    model = ResNet() if residual else Net()
    model.load_state_dict(copy.deepcopy(hf.state_dict()))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay)
    x, y = data(n)
    Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=8, shuffle=False), tricks=tricks,
            max_epochs=epochs, accumulate=accumulate, device=device, seed=0, progress=False, clip=clip,
            scheduler=scheduler, **trainer_kw).fit()
    return model


def max_diff(a: nn.Module, b: nn.Module) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    return max(float((sa[k] - sb[k]).abs().max()) for k in sa)
