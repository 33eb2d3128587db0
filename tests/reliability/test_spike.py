"""``train.spike``: loss spikes (finite, 10-1000x the usual loss, planted by scaling a batch's inputs) are dropped
before they reach the weights; ``rollback`` goes back to its snapshot after repeated ones and lowers the LR; clean
runs are untouched; the decision is checkpointed so a resume after a rollback is exact."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trickbag.errors import RecipeError, TrickbagError
from trickbag.plugin.interface import Plugin
from trickbag.recipe import load_recipe
from trickbag.train.build import build
from trickbag.train.spike import SpikeGuard, is_spike
from trickbag.train.trainer import Trainer


class Spikes(Plugin):
    """Scale the logits of the loader batches at ``at`` ((epoch, batch) pairs) by ``-factor`` in the loss (the
    confident become confidently wrong): a finite loss spike, 10-1000x the usual loss, with gradients to match."""

    def __init__(self, at: set[tuple[int, int]], factor: float = 20.0) -> None:
        self.at, self.factor = at, factor

    def on_loss(self, state) -> None:
        if (state.epoch, state.batch_idx) in self.at:
            state.loss = nn.functional.cross_entropy(state.output * -self.factor, state.batch[1])


class VetoAt(Plugin):
    """The hand-made reference of ``skip``: veto the updates of the batches at ``at`` and put back the BatchNorm
    buffers their forward moved."""

    def __init__(self, at: set[tuple[int, int]]) -> None:
        self.at = at
        self.saved: list[torch.Tensor] = []

    def on_batch_start(self, state) -> None:
        self.saved = [b.clone() for b in state.model.buffers()]

    def on_after_backward(self, state) -> None:
        if (state.epoch, state.batch_idx) in self.at:
            state.veto_update("planted")
            for b, s in zip(state.model.buffers(), self.saved, strict=True):
                b.copy_(s)


class LRLog(torch.optim.SGD):
    """SGD that records the learning rate of each step it takes."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.used: list[float] = []

    def step(self, closure=None):
        self.used.append(self.param_groups[0]["lr"])
        return super().step(closure)


def _data() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 10, generator=g)
    return TensorDataset(x, (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 1).long())


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 3))


def _trainer(model: nn.Module, *, spike=None, plugins=(), epochs: int = 3, opt=None, sched: bool = True) -> Trainer:
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(_data(), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(1))
    scheduler = (lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=40 * epochs)) if sched else None
    return Trainer(model, opt, loader, max_epochs=epochs, device="cpu", progress=False, spike=spike,
                   plugins=list(plugins), scheduler=scheduler)


def _same(a: nn.Module, b: nn.Module, atol: float = 0.0) -> None:
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=atol, msg=k)


@pytest.mark.parametrize("seed", range(6))
def test_is_spike_is_the_documented_rule(seed: int) -> None:
    """Against the rule written with numpy: above ratio x q and q + floor x start, q the window's 95th percentile
    (numpy's "higher" quantile), on heavy-tailed and two-level windows of several lengths and candidates from the
    window's bulk to 1000x its median."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 101))
    window = np.exp(rng.normal(-1 - seed / 2, 0.5, size=n))
    window[: n // 2] *= 3 if seed % 2 else 1  # odd seeds: two kinds of batches, 3x apart (mixed and clean)
    q = np.quantile(window, 0.95, method="higher")
    med = np.median(window)
    for loss in [*rng.choice(window, 5), *(med * np.array([1.5, 3.5, 10, 30, 100, 1000]))]:
        expected = loss > 3 * q and loss > q + 0.5 * 2.0
        assert is_spike(float(loss), list(window), start=2.0, ratio=3, quantile=0.95, floor=0.5) == expected


def test_skip_drops_exactly_the_spiking_updates(capsys) -> None:
    """Logits x-20 at three batches: ``skip`` ends with the weights (BatchNorm statistics included) of a run that
    vetoes those three updates by hand; each is said on stderr and counted in the epoch's metrics."""
    at = {(1, 3), (1, 4), (2, 20)}
    guarded = _model()
    t = _trainer(guarded, spike="skip", plugins=[Spikes(at)])
    t.fit()
    assert t.spike is not None and t.spike.spikes == 3 and t.state.skipped_steps == 3
    assert [h["train/spikes"] for h in t.state.history] == [0.0, 2.0, 1.0]
    err = capsys.readouterr().err
    assert "loss spike at update" in err and "above the spike level" in err
    ref = _model()
    _trainer(ref, plugins=[Spikes(at), VetoAt(at)]).fit()
    _same(guarded, ref)


class NaNAt(Plugin):
    """A NaN loss at the loader batches at ``at``."""

    def __init__(self, at: set[tuple[int, int]]) -> None:
        self.at = at

    def on_loss(self, state) -> None:
        if (state.epoch, state.batch_idx) in self.at:
            state.loss = state.loss * float("nan")


def test_a_spike_right_after_a_non_finite_update_puts_back_the_right_buffers() -> None:
    """The non-finite guard vetoes batch 3, the spike guard batch 4: both updates leave as if they never ran."""
    nan, spikes = {(1, 3)}, {(1, 4), (2, 9)}
    guarded = _model()
    t = Trainer(guarded, torch.optim.SGD(guarded.parameters(), lr=0.1, momentum=0.9),
                DataLoader(_data(), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(1)),
                max_epochs=3, device="cpu", progress=False, spike="skip", nonfinite="skip",
                plugins=[Spikes(spikes), NaNAt(nan)])
    t.fit()
    assert t.spike is not None and t.spike.spikes == 2 and t.state.nonfinite_skipped == 1
    ref = _model()
    _trainer(ref, plugins=[Spikes(spikes), NaNAt(nan), VetoAt(nan | spikes)], sched=False).fit()
    _same(guarded, ref)


def test_unguarded_the_spikes_do_harm() -> None:
    """The premise of the test above: the planted spikes move the weights far (it is not a no-op)."""
    at = {(1, 3), (1, 4), (2, 20)}
    hurt, clean = _model(), _model()
    _trainer(hurt, plugins=[Spikes(at)]).fit()
    _trainer(clean, plugins=[VetoAt(at)]).fit()
    assert max((a - b).abs().max().item() for a, b in zip(hurt.parameters(), clean.parameters(), strict=True)) > 0.1


@pytest.mark.parametrize("policy", ["skip", "rollback"])
def test_a_clean_run_is_untouched(policy: str) -> None:
    guarded, plain = _model(), _model()
    t = _trainer(guarded, spike=policy)
    t.fit()
    _trainer(plain).fit()
    assert t.spike is not None and t.spike.spikes == 0 and t.spike.rollbacks == 0
    _same(guarded, plain)


class Capture(Plugin):
    """The weights after each update, by update number."""

    def __init__(self) -> None:
        self.after: dict[int, dict[str, torch.Tensor]] = {}

    def on_step(self, state) -> None:
        if not state.step_skipped:
            self.after[state.step] = {k: v.clone() for k, v in state.model.state_dict().items()}


def test_rollback_returns_to_the_snapshot_and_cuts_the_lr() -> None:
    """Three spikes in a row in epoch 2 (after 40 + 15 updates): the weights go back to those after update 50 (the
    last snapshot, every 25), and the next 10 steps use half the schedule's learning rate."""
    model, capture = _model(), Capture()
    opt = LRLog(model.parameters(), lr=0.1, momentum=0.9)
    guard = SpikeGuard("rollback", snapshot_every=25, lr_updates=10, out=None)
    at = {(1, 15), (1, 16), (1, 17)}
    back: list[dict[str, torch.Tensor]] = []

    class AtRollback(Plugin):
        def on_step(self, state) -> None:
            if state.step_skipped and guard.rollbacks == 1 and not back:
                back.append({k: v.clone() for k, v in state.model.state_dict().items()})

    t = _trainer(model, spike=guard, plugins=[Spikes(at), capture, AtRollback()], opt=opt, sched=False)
    t.fit()
    assert guard.spikes == 3 and guard.rollbacks == 1
    for k, v in capture.after[50].items():
        torch.testing.assert_close(back[0][k], v, rtol=0, atol=0, msg=k)
    steps_before = 55  # updates taken before the three spikes
    assert opt.used[:steps_before] == [0.1] * steps_before
    assert opt.used[steps_before:steps_before + 10] == [0.05] * 10
    assert opt.used[steps_before + 10:] == [0.1] * (len(opt.used) - steps_before - 10)
    assert t.state.history[1]["train/rollbacks"] == 1.0


def test_a_resume_after_a_rollback_is_exact() -> None:
    """A snapshot every 45 accepted updates (40 per epoch): the one taken in epoch 2 is the target of the rollback
    in epoch 3; a run stopped after epoch 2 and resumed from its state (which carries that snapshot) ends as the
    straight one."""
    at = {(0, 30), (2, 5), (2, 6), (2, 7)}

    def guard() -> SpikeGuard:
        return SpikeGuard("rollback", snapshot_every=45, lr_updates=10, out=None)

    straight = _model()
    t = _trainer(straight, spike=guard(), plugins=[Spikes(at)])
    t.fit()
    assert t.spike is not None and t.spike.rollbacks == 1
    first = _model()
    head = _trainer(first, spike=guard(), plugins=[Spikes(at)], epochs=3)
    head.state.max_epochs = 2
    head.fit()
    sd = head.state_dict()
    assert sd["spike"]["snapshot"] is not None
    resumed = _model()
    tail = _trainer(resumed, spike=guard(), plugins=[Spikes(at)])
    tail.load_state_dict(sd)
    tail.fit()
    assert tail.spike is not None and tail.spike.rollbacks == 1
    _same(resumed, straight)


def test_a_snapshot_above_the_limit_is_refused_when_the_trainer_is_built() -> None:
    words = r"train.spike=rollback needs a snapshot of about 0.00\d+ MB .*spike_max_snapshot_gb is 1e-09"
    with pytest.raises(TrickbagError, match=words):
        _trainer(_model(), spike=SpikeGuard("rollback", max_snapshot_gb=1e-9))


def test_the_recipe_keys_reach_the_guard() -> None:
    base = ["data.name=fake", "data.num_samples=40", "data.shape=[1,4,4]", "train.epochs=1", "run.progress=false"]
    trainer, _ = build(load_recipe("digits", [*base, "train.spike=rollback", "train.spike_snapshot_every=7",
                                              "train.spike_ratio=4", "train.spike_quantile=0.9"]))
    assert isinstance(trainer.spike, SpikeGuard)
    g = trainer.spike
    assert (g.policy, g.snapshot_every, g.ratio, g.quantile) == ("rollback", 7, 4.0, 0.9)
    trainer, _ = build(load_recipe("digits", base))
    assert trainer.spike is None
    with pytest.raises(RecipeError, match="spike_warmup=50 must not exceed train.spike_window=30"):
        build(load_recipe("digits", [*base, "train.spike=skip", "train.spike_window=30", "train.spike_warmup=50"]))


def test_start_scale_is_the_median_of_the_first_warmup_losses() -> None:
    g = SpikeGuard("skip", warmup=4, window=100, out=None)
    _trainer(_model(), spike=g, epochs=1).fit()
    assert len(g.window) == 40  # every update's loss, none rolled off
    assert g.start_scale == statistics.median(list(g.window)[:4])
