"""SAM with fp16 (train.precision=16), on the CPU's float16 autocast and GradScaler("cpu"): two scaled passes,
one scaler step; the perturbation from unscaled first-pass gradients; an overflow in either pass skips the
update, leaves the weights as they were and backs the scale off; a skipped update advances neither the
schedule nor EMA. The reference is SAM + GradScaler written out by hand in this file."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from trickbag.optim import SAM
from trickbag.plugin.interface import Plugin
from trickbag.train.trainer import Trainer

RHO, LR = 0.05, 0.2


def _data():
    torch.manual_seed(0)
    x, y = torch.randn(48, 8), torch.randint(0, 3, (48,))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    return x, y, model


def _finite(params) -> bool:
    return all(bool(torch.isfinite(p.grad).all()) for p in params if p.grad is not None)


def _reference(model, x, y, batch, blow_up=None, adaptive=False):
    """SAM with a GradScaler by hand; ``blow_up(update, second_pass)`` says when to make the loss inf."""
    opt = SAM(model.parameters(), torch.optim.SGD, rho=RHO, lr=LR, adaptive=adaptive)
    scaler = torch.amp.GradScaler("cpu")
    params = list(model.parameters())
    for k, i in enumerate(range(0, len(x), batch)):
        xb, yb = x[i:i + batch], y[i:i + batch]
        for second in (False, True):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(xb), yb)
            if blow_up is not None and blow_up(k, second):
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            if not second:
                scaler.unscale_(opt)
                if not _finite(params):
                    scaler.update()
                    opt.zero_grad()
                    break
                opt.first_step(zero_grad=True)
                continue
            for p in params:
                p.grad.mul_(1.0 / scaler.get_scale())
            if not _finite(params):
                with torch.no_grad():
                    for p in params:
                        p.copy_(opt.state[p]["old_p"])
                opt._perturbed = None
                scaler.update(new_scale=scaler.get_scale() * scaler.get_backoff_factor())
                opt.zero_grad()
                break
            opt.second_step(zero_grad=True)
            scaler.update()
    return scaler.get_scale()


class BlowUp(Plugin):
    """Make the loss inf on the given (update, second pass) pairs."""

    def __init__(self, when):
        self.when, self.update = when, 0

    def on_loss(self, state):
        if self.when(self.update, state.closure_pass):
            state.loss = state.loss * float("inf")

    def on_step(self, state):
        self.update += 1


def _trainer(model, x, y, batch, plugins=(), tricks=None, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    return Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=batch), precision="16", device="cpu",
                   tricks=tricks or {"sam": {"rho": RHO}}, plugins=list(plugins), progress=False, **kw)


@pytest.mark.parametrize("adaptive", [False, True], ids=["sam", "asam"])
@pytest.mark.parametrize("blow", [None, (1, False), (2, True)], ids=["clean", "first-pass overflow",
                                                                  "second-pass overflow"])
def test_sam_fp16_matches_sam_with_a_gradscaler_written_by_hand(blow, adaptive):
    x, y, model = _data()
    ref = copy.deepcopy(model)
    when = (lambda k, second: (k, second) == blow) if blow else None
    t = _trainer(model, x, y, 8, plugins=[BlowUp(when)] if when else [],
                 tricks={"sam": {"rho": RHO, "adaptive": adaptive}})
    state = t.fit()
    ref_scale = _reference(ref, x, y, 8, when, adaptive)
    for p, q in zip(ref.parameters(), model.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert state.scaler.get_scale() == ref_scale
    assert (state.step, state.skipped_steps) == ((6, 0) if blow is None else (5, 1))


@pytest.mark.parametrize("second", [False, True], ids=["first pass", "second pass"])
def test_an_overflow_skips_the_update_with_the_weights_as_they_were_and_no_schedule_or_ema_step(second):
    x, y, model = _data()
    seen = {}

    class Watch(Plugin):
        def on_batch_start(self, state):
            if state.step == 2 and "before" not in seen:
                seen["before"] = [p.detach().clone() for p in state.model.parameters()]

        def on_step(self, state):
            if state.step_skipped:
                seen["after"] = [p.detach().clone() for p in state.model.parameters()]
                seen["scale"] = state.scaler.get_scale()

    t = _trainer(model, x, y, 8, plugins=[BlowUp(lambda k, s: (k, s) == (2, second)), Watch()],
                 tricks={"sam": {"rho": RHO}, "ema": {"decay": 0.9}},
                 scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.9))
    scale0 = t.state.scaler.get_scale()
    state = t.fit()
    for a, b in zip(seen["before"], seen["after"]):
        assert torch.equal(a, b)  # not stepped, and not left at the perturbed weights
    assert seen["scale"] == scale0 * 0.5
    assert (state.step, state.skipped_steps) == (5, 1)
    assert state.scheduler.last_epoch == 5  # stepped once per applied update only
    ema = next(p for p in t.plugins if p.name == "ema")
    assert ema.ema.num_updates == 5


def test_a_plain_fp16_overflow_advances_neither_schedule_nor_ema():
    """The one-pass fp16 path: the GradScaler skips the inf update; the trainer counts it as skipped."""
    x, y, model = _data()
    t = _trainer(model, x, y, 8, plugins=[BlowUp(lambda k, s: k == 3)], tricks={"ema": {"decay": 0.9}},
                 scheduler=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.9))
    state = t.fit()
    assert (state.step, state.skipped_steps) == (5, 1)
    assert state.scheduler.last_epoch == 5
    assert next(p for p in t.plugins if p.name == "ema").ema.num_updates == 5
