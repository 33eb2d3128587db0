"""train/persistence.py: the Checkpointer is given a State and the loop's parts, never the Trainer; plug-ins reach
it through ``state.services``."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trickbag.plugin.state import Services, State
from trickbag.train import persistence
from trickbag.train.averaged import ScheduleFreeModes
from trickbag.train.bookkeeping import ResumeCursor
from trickbag.train.checkpoint_files import load_checkpoint
from trickbag.train.persistence import Checkpointer
from trickbag.train.trainer import Trainer


def _loader() -> DataLoader:
    torch.manual_seed(0)
    x = torch.randn(32, 4)
    return DataLoader(TensorDataset(x, (x[:, 0] > 0).long()), batch_size=8)


def test_the_persistence_module_never_imports_the_trainer() -> None:
    tree = ast.parse(Path(persistence.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.startswith("trickbag.train.trainer") for m in imported)
    params = inspect.signature(Checkpointer).parameters
    assert "trainer" not in params and all("Trainer" not in str(p.annotation) for p in params.values())


def test_a_checkpointer_built_without_a_trainer_writes_what_the_trainer_writes(tmp_path: Path) -> None:
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    state = State(model=model, optimizer=opt, task=None, loss_fn=torch.nn.functional.cross_entropy,
                  train_loader=_loader(), val_loader=None, device=torch.device("cpu"), precision="32", accumulate=1,
                  max_epochs=1, scaler=torch.amp.GradScaler("cpu", enabled=False))
    ckpt = Checkpointer(state, plugins=[], guard=None, cursor=ResumeCursor(), meter=lambda: None,
                        modes=ScheduleFreeModes(state), sharded=False)
    written = load_checkpoint(ckpt.save(tmp_path / "last.pt", note="hi"))
    other = torch.nn.Linear(4, 2)
    trainer = Trainer(other, torch.optim.SGD(other.parameters(), lr=0.1), _loader(), device="cpu", progress=False)
    assert set(written) == set(trainer.state_dict()) | {"note"}
    assert torch.equal(written["model"]["weight"], model.weight.detach())
    state.step = 7
    ckpt.load_state_dict(written)
    assert state.step == 0 and written["counters"]["world_size"] == 1


def test_plugins_reach_the_trainer_through_state_services(tmp_path: Path) -> None:
    model = torch.nn.Linear(4, 2)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), _loader(), device="cpu", progress=False)
    services = trainer.state.services
    assert isinstance(services, Services)
    assert services.weights_finite() is True
    assert load_checkpoint(services.save_checkpoint(tmp_path / "a.pt", resume=False))["weights_only"] is True
    assert set(services.eval_loop(_loader())) >= {"acc", "loss", "n"}
    for old in ("save_checkpoint", "weights_finite", "eval_loop"):
        with pytest.warns(DeprecationWarning, match=f"state.services.{old}"):
            assert getattr(trainer.state, old) == getattr(services, old)
