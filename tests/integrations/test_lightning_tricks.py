"""More tricks through Lightning against trickbag's own Trainer (the reference: same network, initial weights, data
order and seed; fp32 on the CPU, 1e-5): drop_path, cutout, random_erasing (on [2, 4, 4] images), distillation,
grad_norm (the logged norms too), SWA with the BatchNorm recalibration; EMA's select: best/raw refused."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integrations.conftest import lightning_fit
from tests.integrations.hf_models import LR, Net, ResNet, data

pytest.importorskip("lightning")

from trickbag.errors import RecipeError  # noqa: E402
from trickbag.integrations.lightning import TricksCallback  # noqa: E402
from trickbag.train.trainer import Trainer  # noqa: E402

TOL = 1e-5


class BNNet(Net):
    """With BatchNorm: what SWA's recalibration (update_bn) recomputes."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(nn.Flatten(), nn.Linear(32, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 16),
                                    nn.ReLU())


def teacher() -> nn.Module:
    """The distillation teacher (``tests.integrations.test_lightning_tricks:teacher``): a fixed random network."""
    torch.manual_seed(123)
    return Net()


def adamw(params: Any) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


def train_loader() -> DataLoader:
    x, y = data(44)
    return DataLoader(TensorDataset(x, y), batch_size=8, shuffle=False)


def start(kind: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return kind()


def reference(kind: type[nn.Module], tricks: dict[str, Any]) -> tuple[nn.Module, Any]:
    model = start(kind)
    state = Trainer(model, adamw(model.parameters()), train_loader(), tricks=tricks, max_epochs=2, device="cpu",
                    seed=0, progress=False).fit()
    return model, state


def through_lightning(lit: Any, kind: type[nn.Module], tricks: dict[str, Any], *, use_loss: bool = False
                      ) -> tuple[nn.Module, Any, Any]:
    module = lit(start(kind), adamw, use_loss=use_loss)
    callback = TricksCallback(tricks=tricks, seed=0)
    trainer = lightning_fit(module, train_loader(), callbacks=[callback], epochs=2)
    return module.model, callback, trainer


def max_diff(a: nn.Module, b: nn.Module) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    return max(float((sa[k].double() - sb[k].double()).abs().max()) for k in sa)


CASES = {
    "drop_path": (ResNet, {"drop_path": {"rate": 0.5, "blocks": ["Res"]}}, False),
    "cutout": (Net, {"cutout": {"size": 2}}, False),
    "random_erasing": (Net, {"random_erasing": {"prob": 0.5}}, False),
    "distillation": (Net, {"distillation": {"teacher": f"{__name__}:teacher", "alpha": 0.7}}, True),
    "swa+update_bn": (BNNet, {"swa": {"start_epoch": 1, "update_bn": True}}, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_trick_equals_trickbag_trainer(lit: Any, name: str) -> None:
    kind, tricks, use_loss = CASES[name]
    ref, _ = reference(kind, tricks)
    ours, _, _ = through_lightning(lit, kind, tricks, use_loss=use_loss)
    assert max_diff(ours, ref) < TOL
    plain, _ = reference(kind, {})
    assert max_diff(ref, plain) > 1e-4  # the trick did something


def test_grad_norm_logs_what_trickbag_trainer_logs(lit: Any) -> None:
    """The weights equal the reference's and the epoch's gradient norms (mean, max) reach Lightning's logged
    metrics (``trainer.callback_metrics``) with the reference's values."""
    tricks = {"grad_norm": {}}
    ref, state = reference(Net, tricks)
    ours, _, trainer = through_lightning(lit, Net, tricks)
    assert max_diff(ours, ref) < TOL
    last = state.history[-1]
    for key in ("train/grad_norm", "train/grad_norm_max"):
        assert abs(float(trainer.callback_metrics[key]) - last[key]) < TOL


@pytest.mark.parametrize("setting", [{"select": "best"}, {"select": "raw"}])
def test_ema_select_is_refused(setting: dict[str, Any]) -> None:
    with pytest.raises(RecipeError, match="ema.select"):
        TricksCallback(tricks={"ema": {"decay": 0.9, **setting}})
