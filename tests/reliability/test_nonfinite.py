"""Non-finite loss or gradients: caught in the update where they appear; skip (counted, K in a row
stops) or stop (checkpoint of the last good state); fp16 GradScaler overflow skips are not errors.

References: a hand-written loop that simply leaves out the poisoned updates, and torch's own
GradScaler behaviour for the fp16 case.
"""

from __future__ import annotations

import copy
import re
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import StopReason
from trickbag.train.nonfinite import NonFiniteGuard
from trickbag.train.plugins.checkpoints import Checkpointing
from trickbag.train.trainer import Trainer

from ._helpers import load, run_inprocess, write_recipe

N, BATCH = 48, 8  # 6 updates per epoch


class Poison(Plugin):
    """Multiply the loss of chosen (epoch, batch) micro-batches by ``value`` (NaN or inf) at LOSS."""

    def __init__(self, where: set[tuple[int, int]], value: float = float("nan")) -> None:
        self.where, self.value = where, value

    def on_loss(self, state):
        if (state.epoch, state.batch_idx) in self.where:
            state.loss = state.loss * self.value


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    x, y = torch.randn(N, 5), torch.randint(0, 3, (N,))
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    return x, y, model


def _trainer(model, x, y, plugins, epochs=2, precision="32"):
    """A trainer with ``plugins``; a :class:`NonFiniteGuard` among them becomes the trainer's guard."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 / (1.0 + 0.1 * k))
    guards = [p for p in plugins if isinstance(p, NonFiniteGuard)]
    return Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=BATCH), scheduler=sched,
                   plugins=[p for p in plugins if p not in guards], max_epochs=epochs, device="cpu",
                   precision=precision, nonfinite=guards[0] if guards else None)


def _naive(model, x, y, skip: set[tuple[int, int]], epochs=2, stop_after=None):
    """Hand-written loop: a skipped batch gets its forward pass but no update and no schedule step."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 / (1.0 + 0.1 * k))
    loss_sums, updates = [], 0
    for epoch in range(epochs):
        total, count = 0.0, 0
        for i in range(N // BATCH):
            xb, yb = x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
            if (epoch, i) in skip:
                continue  # the guard restores the BatchNorm statistics this forward would have moved
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            total += float(loss.detach().double()) * BATCH
            count += BATCH
            updates += 1
            if stop_after is not None and updates == stop_after:
                return model, loss_sums, updates
        loss_sums.append(total / count)
    return model, loss_sums, updates


def _assert_same_model(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_skip_policy_leaves_out_exactly_the_poisoned_updates(value):
    x, y, model = _setup()
    bad = {(0, 2), (1, 4)}
    guard = NonFiniteGuard("skip", max_in_row=2, out=None)
    t = _trainer(copy.deepcopy(model), x, y, [Poison(bad, value), guard])
    state = t.fit()
    ref, loss_means, updates = _naive(model, x, y, bad)
    _assert_same_model(t.model, ref)
    assert state.step == updates == 10 and state.skipped_steps == 2 and guard.skipped == 2
    # epoch 1 made 5 updates, so epoch 2's 5th batch would have been update 10
    assert guard.last_update == 10 and state.nonfinite_skipped == 2
    assert not state.should_stop
    assert t.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 / (1 + 0.1 * updates), rel=0, abs=0)
    # the skipped micro-batches do not turn the epoch's train/loss into NaN/inf
    assert [h["train/loss"] for h in state.history] == pytest.approx(loss_means, rel=1e-12)


class PoisonSecondPass(Plugin):
    """Make SAM's second-pass loss NaN (the first pass is fine) for chosen (epoch, batch) updates."""

    def __init__(self, where: set[tuple[int, int]]) -> None:
        self.where = where

    def on_loss(self, state):
        if state.closure_pass and (state.epoch, state.batch_idx) in self.where:
            state.loss = state.loss * float("nan")


def test_sam_second_pass_that_turns_non_finite_is_skipped_with_weights_and_bn_stats_restored(capsys):
    from trickbag.optim import SAM, disable_running_stats, enable_running_stats

    x, y, model = _setup()
    bad = {(0, 1), (0, 4)}
    guard = NonFiniteGuard("skip", max_in_row=3, out=sys.stderr)

    class SAMBN(Plugin):  # the recipe's SAM trick: BN statistics move in the first pass only
        def on_after_backward(self, state):
            if not state.closure_pass:
                disable_running_stats(state.model)

        def on_step(self, state):
            enable_running_stats(state.model)

    m = copy.deepcopy(model)
    opt = SAM(m.parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9)
    t = Trainer(
        m,
        opt,
        DataLoader(TensorDataset(x, y), batch_size=BATCH),
        plugins=[PoisonSecondPass(bad), SAMBN()],
        nonfinite=guard,
        max_epochs=1,
        device="cpu",
    )
    state = t.fit()
    assert guard.skipped == 2 and state.skipped_steps == 2 and state.step == 4
    assert (
        "non-finite loss and gradients at update 2 (epoch 1, batch 2) in SAM's second pass" in capsys.readouterr().err
    )
    # reference: a hand-written SAM loop (first_step / second_step) that leaves out the poisoned updates
    ref = copy.deepcopy(model)
    ref_opt = SAM(ref.parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9)
    for i in range(N // BATCH):
        if (0, i) in bad:
            continue  # the guard put back the weights and the BatchNorm statistics of the first pass
        xb, yb = x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
        F.cross_entropy(ref(xb), yb).backward()
        ref_opt.first_step(zero_grad=True)
        disable_running_stats(ref)
        F.cross_entropy(ref(xb), yb).backward()
        enable_running_stats(ref)
        ref_opt.second_step(zero_grad=True)
    _assert_same_model(t.model, ref)
    assert all(bool(torch.isfinite(v).all()) for v in t.model.state_dict().values() if v.is_floating_point())


def test_gradients_alone_are_checked_and_named(capsys):
    class InfGrad(Plugin):
        def on_after_backward(self, state):
            if state.batch_idx == 2:  # the 3rd update
                next(state.model.parameters()).grad[0, 0] = float("inf")

    x, y, model = _setup()
    guard = NonFiniteGuard("skip", out=sys.stderr)
    t = _trainer(copy.deepcopy(model), x, y, [InfGrad(), guard], epochs=1)
    state = t.fit()
    assert guard.skipped == 1 and state.step == 5
    assert "non-finite gradients at update 3 (epoch 1, batch 3): update skipped" in capsys.readouterr().err
    ref, _, _ = _naive(model, x, y, {(0, 2)}, epochs=1)
    _assert_same_model(t.model, ref)


def test_stop_policy_keeps_the_last_regular_checkpoint_and_names_the_update(tmp_path):
    """The updates just before a divergence are what led to it (weights of 1e14 are finite but not a
    state to resume from): the stop writes no checkpoint of its own; the last regular one is kept."""
    x, y, model = _setup()
    ckpt = Checkpointing(tmp_path, every_steps=2)
    t = _trainer(copy.deepcopy(model), x, y, [Poison({(0, 3)}), NonFiniteGuard("stop", out=None), ckpt])
    state = t.fit()
    assert state.stop_reason is StopReason.NONFINITE
    assert state.stop_detail == "loss and gradients at update 4 (epoch 1, batch 4); stopped by train.nonfinite=stop"
    assert state.step == 3 and state.history == []
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["step-00000002.pt"]
    saved = load(tmp_path / "step-00000002.pt")
    assert saved["counters"] == {**saved["counters"], "epoch": 0, "step": 2, "batch_idx": 2}
    ref, _, _ = _naive(model, x, y, set(), stop_after=2)
    for k, v in ref.state_dict().items():  # weights and BatchNorm statistics of update 2, all finite
        assert torch.equal(saved["model"][k], v), k
        assert torch.isfinite(saved["model"][k].float()).all()


@pytest.mark.parametrize("bad, stops", [({(0, 1), (0, 2), (0, 3)}, True), ({(0, 1), (0, 2), (0, 4), (0, 5)}, False)])
def test_skip_policy_stops_only_after_max_in_row_consecutive_bad_updates(bad, stops):
    x, y, model = _setup()
    guard = NonFiniteGuard("skip", max_in_row=3, out=None)
    state = _trainer(copy.deepcopy(model), x, y, [Poison(bad), guard], epochs=1).fit()
    assert state.should_stop is stops and guard.skipped == (3 if stops else 4)
    if stops:
        assert state.stop_message.startswith("non-finite: loss and gradients in 3 updates in a row (last at update 2")
        assert "train.max_nonfinite=3" in state.stop_detail


def test_fp16_overflow_skips_are_counted_but_not_errors():
    """GradScaler starting at 2**40 overflows fp16 gradients for a few updates and halves its scale
    each time: the trainer counts those skips, the guard (stop on the first error) ignores them."""
    x, y, model = _setup()
    guard = NonFiniteGuard("stop", max_in_row=1, out=None)
    t = _trainer(copy.deepcopy(model), x, y, [guard], epochs=1, precision="16")
    t.state.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    state = t.fit()
    overflow = state.skipped_steps
    assert not state.should_stop and guard.skipped == 0
    assert overflow >= 1 and state.step == N // BATCH - overflow
    assert t.state.scaler.get_scale() == 2.0**40 * 0.5**overflow  # one halving per overflow skip


def test_fp16_veto_closes_the_scaler_iteration():
    """A vetoed fp16 update must still call scaler.update(): otherwise the next unscale_ fails with
    'unscale_() has already been called on this optimizer since the last update()'."""
    x, y, model = _setup()
    guard = NonFiniteGuard("skip", out=None)
    t = _trainer(copy.deepcopy(model), x, y, [Poison({(0, 1)}), guard], epochs=1, precision="16")
    state = t.fit()
    assert guard.skipped == 1 and state.step == N // BATCH - state.skipped_steps


def test_one_host_read_per_update(monkeypatch):
    """The guard reads device values once per optimizer update (one .tolist() of two flags)."""
    reads = []
    for name in ("item", "tolist", "__bool__", "__float__", "__int__", "numpy"):
        original = getattr(torch.Tensor, name)

        def counted(self, *a, _original=original, _name=name, **kw):
            if sys._getframe(1).f_code.co_filename.endswith("nonfinite.py"):
                reads.append(_name)
            return _original(self, *a, **kw)

        monkeypatch.setattr(torch.Tensor, name, counted)
    x, y, model = _setup()
    state = _trainer(model, x, y, [Poison({(0, 2)}), NonFiniteGuard("skip", out=None)], epochs=1).fit()
    monkeypatch.undo()
    assert reads == ["tolist"] * (N // BATCH) and state.skipped_steps == 1


def test_guard_validates_its_arguments():
    with pytest.raises(ValueError, match="policy must be 'skip' or 'stop', got 'ignore'"):
        NonFiniteGuard("ignore")
    with pytest.raises(ValueError, match="max_in_row must be an int >= 1, got 0"):
        NonFiniteGuard("skip", 0)


@pytest.mark.parametrize("policy", ["stop", "skip"])
def test_cli_run_that_diverges_stops_with_one_error_line_and_resumes_with_a_lower_lr(tmp_path, capsys, policy):
    """optim.lr=1e6 diverges in the first epoch: one error line, exit 1, no poisoned checkpoint, a summary
    that names only files that exist; ``--resume RUN optim.lr=0.05`` then trains to the end."""
    recipe = write_recipe(tmp_path)
    run = tmp_path / "runs" / "nf"
    rc, out, err = run_inprocess(["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=nf", "--quiet",
                                  "optim.lr=1e6", f"train.nonfinite={policy}", "train.max_nonfinite=2"], capsys)
    assert rc == 1
    errors = [line for line in err.splitlines() if line.startswith("trickbag: error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert errors[0].startswith("trickbag: error: training stopped: non-finite: loss")
    assert f"trickbag train --resume {run} optim.lr=" in errors[0]
    kept = sorted(p.name for p in (run / "checkpoints").glob("*.pt"))
    for name in kept:  # whatever was kept is finite, weights and buffers
        for k, v in load(run / "checkpoints" / name)["model"].items():
            assert not v.is_floating_point() or torch.isfinite(v).all(), (name, k)
    if not kept:
        assert "restarts it from the beginning" in errors[0]
    summary = (run / "summary.txt").read_text()
    assert "non-finite loss/gradients" in summary
    for name in ("best.pt", "last.pt"):
        assert (name in summary) == (name in kept), (name, summary)
    rc, out, err = run_inprocess(["train", "--resume", str(run), "optim.lr=0.05", "--quiet"], capsys)
    assert rc == 0, err
    epochs = int(re.search(r"\bepochs: (\d+)", recipe.read_text()).group(1))
    final = load(run / "checkpoints" / "last.pt")
    assert final["counters"]["epoch"] == epochs
    assert all(torch.isfinite(v).all() for v in final["model"].values() if v.is_floating_point())
