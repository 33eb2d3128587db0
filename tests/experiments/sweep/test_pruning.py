"""The pruning plug-in against Optuna's median rule, in a plain Trainer: it reports every epoch and stops
the run with StopReason.PRUNED exactly when the pruner says so."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

optuna = pytest.importorskip("optuna")

from trickbag.experiments.sweep import PruningReporter  # noqa: E402
from trickbag.plugin.state import StopReason  # noqa: E402
from trickbag.train.trainer import Trainer  # noqa: E402


def _fit(trial, lr: float, zero: bool, epochs: int = 3):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 2, generator=g)
    y = (x[:, 0] > 0).long()  # half of each class, linearly separable
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    if zero:  # constant logits: argmax picks class 0, accuracy = share of class 0
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    reporter = PruningReporter(trial, "val/acc")
    t = Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=32),
                DataLoader(TensorDataset(x, y), batch_size=128), plugins=[reporter], max_epochs=epochs, device="cpu")
    state = t.fit()
    return reporter, state, float((y == 0).float().mean())


def test_pruning_reporter_follows_the_median_rule_and_stops_the_run():
    study = optuna.create_study(direction="maximize",
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0))
    t0 = study.ask()
    good, state, _ = _fit(t0, lr=0.5, zero=False)
    assert not good.pruned and len(state.history) == 3 and state.stop_reason is None
    assert [v for _, v in good.reported] == [h["val/acc"] for h in state.history]
    study.tell(t0, max(v for _, v in good.reported))
    # reference rule: prune at step s when this trial's best so far is below the median of finished trials at s
    t1 = study.ask()
    bad, state, share0 = _fit(t1, lr=0.0, zero=True)
    first = bad.reported[0][1]
    assert first == pytest.approx(share0)
    assert first < good.reported[0][1]  # so the median rule prunes at epoch 0 ...
    assert bad.pruned and len(state.history) == 1 and state.should_stop  # ... and the run stops there
    assert state.stop_reason is StopReason.PRUNED and "at epoch 1" in state.stop_detail
    study.tell(t1, state=optuna.trial.TrialState.PRUNED)
    t2 = study.ask()  # as good as the median: never strictly worse, never pruned
    same, state, _ = _fit(t2, lr=0.5, zero=False)
    assert not same.pruned and len(state.history) == 3
