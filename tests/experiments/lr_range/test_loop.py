"""lr_find in a hand-written loop: the stability bound of least squares, exact restoration of model /
optimizer / RNG, per-group LR ratios, closure optimizers and argument checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from trickbag.experiments.lr_range import lr_find


def _least_squares(n: int = 256, d: int = 8):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g) * torch.logspace(0, -1, d)
    w = torch.randn(d, 1, generator=g)
    y = x @ w + 0.1 * torch.randn(n, 1, generator=g)
    hessian = 2.0 * x.T @ x / n  # of mean((x w - y)^2)
    lam_max = float(torch.linalg.eigvalsh(hessian.double()).max())
    return x, y, lam_max


@pytest.mark.parametrize("rule", ["steepest", "min10"])
@pytest.mark.parametrize("steps", [100, 200])
def test_suggestion_lands_inside_the_stable_range_of_least_squares(rule, steps):
    """Full-batch GD on a quadratic is stable iff lr < 2 / lambda_max(H); the loss cannot blow up below it."""
    x, y, lam_max = _least_squares()
    model = torch.nn.Linear(x.shape[1], 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(TensorDataset(x, y), batch_size=len(x))
    res = lr_find(model, opt, loader, F.mse_loss, steps=steps, start=1e-6, end=10.0, rule=rule)
    bound = 2.0 / lam_max
    assert res.stop_reason is not None and res.lrs[-1] > bound  # divergence detected, and only above the bound
    # good range: stable, and fast enough that the stiffest direction shrinks >= 5 % per step
    assert 0.05 / lam_max <= res.suggestion < bound, (res.suggestion, bound)
    assert res.rule == rule
    # the recorded LRs are the exponential schedule start * (end/start)^(i/(steps-1))
    expected = 1e-6 * (10.0 / 1e-6) ** (np.arange(len(res.lrs)) / (steps - 1))
    np.testing.assert_allclose(res.lrs, expected, rtol=1e-12)


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                        torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))

    def forward(self, x):
        return self.body(x)


def test_model_optimizer_and_rng_are_restored_exactly():
    torch.manual_seed(0)
    model = _Net()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(96, 4, generator=g), torch.randint(0, 3, (96,), generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=32)  # shorter than the sweep: cycled
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    model.train()
    F.cross_entropy(model(x[:32]), y[:32]).backward()
    opt.step()  # momentum buffers exist now
    opt.zero_grad()
    model.eval()
    params = {k: v.clone() for k, v in model.state_dict().items()}  # incl. BatchNorm running stats
    state = {id(p): {k: v.clone() for k, v in s.items()} for p, s in opt.state.items()}
    rng = torch.get_rng_state()
    res = lr_find(model, opt, loader, steps=40, start=1e-4, end=50.0)
    assert len(res.lrs) > 3
    for k, v in model.state_dict().items():
        assert torch.equal(v, params[k]), k
    assert not model.training  # mode restored
    assert opt.param_groups[0]["lr"] == 0.05 and opt.param_groups[0]["momentum"] == 0.9
    assert len(opt.state) == len(state)
    for p, s in opt.state.items():
        for k, v in s.items():
            assert torch.equal(v, state[id(p)][k]), k
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(p.grad is None for p in model.parameters())


def test_param_group_ratios_are_kept():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD([{"params": model[0].parameters(), "lr": 0.01},
                           {"params": model[2].parameters(), "lr": 0.1}])
    seen = []
    orig_step = opt.step

    def step(*a, **k):
        seen.append([g["lr"] for g in opt.param_groups])
        return orig_step(*a, **k)

    opt.step = step
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    lr_find(model, opt, [(x, y)], steps=5, start=1e-3, end=1e-1)
    for lr0, lr1 in seen:
        assert lr1 == pytest.approx(10 * lr0)
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.1]


def test_closure_optimizer_is_stepped_with_a_closure():
    from trickbag.optim import SAM

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = SAM(model.parameters(), torch.optim.SGD, lr=0.1, rho=0.05)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    res = lr_find(model, opt, [(x, y)], steps=10, start=1e-3, end=1.0)
    assert len(res.losses) == 10 and all(math.isfinite(v) for v in res.losses)
    assert res.losses[-1] < res.losses[0]  # it trained
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_bad_arguments():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = [(torch.randn(4, 2), torch.tensor([0, 1, 0, 1]))]
    with pytest.raises(ValueError, match="need 0 < start < end"):
        lr_find(model, opt, batch, start=1.0, end=0.1)
    with pytest.raises(ValueError, match="steps must be an integer >= 2"):
        lr_find(model, opt, batch, steps=1)
    with pytest.raises(ValueError, match="diverge must be a number > 1"):
        lr_find(model, opt, batch, diverge=0.5)
    with pytest.raises(ValueError, match="loader yields no batches"):
        lr_find(model, opt, [])
