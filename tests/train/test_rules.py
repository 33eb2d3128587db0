"""The ordering rules of the training loop (docs/design.md, "The loop").

Each test compares the Trainer with a hand-written reference loop or with probes that record what
the loop did, so it fails if the corresponding rule is broken: loss divided by the accumulation
count (also for a short last group), clipping after unscale and once per update, the scheduler
stepped per update, evaluation under inference_mode + eval(), autocast around forward + loss
only, the fp16 GradScaler path, zero_grad(set_to_none=True), DDP no_sync, and the closure seam.
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trickbag.plugin.interface import Plugin
from trickbag.train.trainer import Trainer


# --------------------------------------------------------------------------- helpers
def make_data(n: int, d: int = 4, k: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    y = torch.randint(0, k, (n,), generator=g)
    return x, y


def loader(x: torch.Tensor, y: torch.Tensor, batch_size: int) -> DataLoader:
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=False)


def linear(d: int = 4, k: int = 3, seed: int = 0) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(d, k)


def params_of(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def groups_of(n_batches: int, accumulate: int) -> list[list[int]]:
    """Micro-batch indices of each optimizer update (the last group may be short)."""
    return [list(range(s, min(s + accumulate, n_batches))) for s in range(0, n_batches, accumulate)]


class Recorder(Plugin):
    """Calls ``fn(state)`` at one event."""

    def __init__(self, event: str, fn) -> None:
        self.event, self.fn = event, fn
        setattr(self, "on_" + event, fn)

    def handles(self, event) -> bool:  # instance attribute instead of a subclass override
        return event.value == self.event


# --------------------------------------------------------------------------- accumulation
def test_accumulating_four_micro_batches_equals_one_big_batch():
    """4 micro-batches of 16 with accumulate=4 make the same update as one batch of 64 (atol 1e-6)."""
    x, y = make_data(64)
    model = linear()
    ref = linear()
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.5), loader(x, y, 16), accumulate=4,
                      device="cpu")
    state = trainer.fit()
    assert state.step == 1

    opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    F.cross_entropy(ref(x), y).backward()  # one batch of 64: mean over all samples
    opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)


def test_short_last_accumulation_group_divides_by_its_own_size():
    """5 micro-batches with accumulate=2: updates over batches {0,1}, {2,3}, {4}; the last is not halved."""
    x, y = make_data(80)
    model, ref = linear(), linear()
    lr = 0.5
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=lr), loader(x, y, 16), accumulate=2,
                      device="cpu")
    assert trainer.fit().step == 3

    # reference: each update is plain SGD on the mean loss over the samples of its group
    for group in groups_of(5, 2):
        idx = torch.cat([torch.arange(16 * b, 16 * (b + 1)) for b in group])
        ref.zero_grad(set_to_none=True)
        F.cross_entropy(ref(x[idx]), y[idx]).backward()
        with torch.no_grad():
            for p in ref.parameters():
                p -= lr * p.grad
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)


# --------------------------------------------------------------------------- clipping
def naive_clip(grads: list[torch.Tensor], max_norm: float) -> list[torch.Tensor]:
    norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
    coef = min(1.0, max_norm / (norm + 1e-6))
    return [g * coef for g in grads]


def test_clipping_once_per_update_on_the_accumulated_gradient(monkeypatch):
    x, y = make_data(96)
    model, ref = linear(), linear()
    lr, clip, acc, bs = 0.5, 0.05, 3, 16
    calls = []
    real = torch.nn.utils.clip_grad_norm_

    def counting_clip(params, *args, **kwargs):
        calls.append(1)
        return real(params, *args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", counting_clip)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=lr), loader(x, y, bs), accumulate=acc,
                      clip=clip, device="cpu")
    state = trainer.fit()
    assert state.step == 2
    assert len(calls) == state.step  # once per optimizer update, not per micro-batch

    for group in groups_of(6, acc):
        idx = torch.cat([torch.arange(bs * b, bs * (b + 1)) for b in group])
        ref.zero_grad(set_to_none=True)
        F.cross_entropy(ref(x[idx]), y[idx]).backward()
        clipped = naive_clip([p.grad for p in ref.parameters()], clip)
        with torch.no_grad():
            for p, g in zip(ref.parameters(), clipped):
                p -= lr * g
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)


def test_clipping_sees_unscaled_gradients_under_fp16(monkeypatch):
    """With precision='16' the GradScaler multiplies the loss by 65536; clipping must see true gradients."""
    x, y = make_data(32)
    model = linear()
    seen = []  # (norm of grads at clip time, reference norm from an fp32 backward at the same weights)
    real = torch.nn.utils.clip_grad_norm_

    def probing_clip(params, *args, **kwargs):
        params = list(params)
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
        ref = nn.Linear(4, 3)
        ref.load_state_dict(model.state_dict())
        xb, yb = x[16 * len(seen):16 * (len(seen) + 1)], y[16 * len(seen):16 * (len(seen) + 1)]
        F.cross_entropy(ref(xb), yb).backward()  # this update's micro-batch, in fp32, unscaled
        ref_norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in ref.parameters()]))
        seen.append((float(norm), float(ref_norm)))
        return real(params, *args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", probing_clip)
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader(x, y, 16), precision="16",
                      clip=1.0, device="cpu")
    assert trainer.state.scaler.is_enabled()
    trainer.fit()
    assert len(seen) == 2
    for norm, ref_norm in seen:
        assert norm == pytest.approx(ref_norm, rel=2e-2)  # scaled grads would be ~65536x larger


# --------------------------------------------------------------------------- scheduler
def test_scheduler_steps_once_per_update_not_per_micro_batch():
    x, y = make_data(80)
    model = linear()
    lr, gamma = 0.1, 0.5
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=gamma)
    lrs = []
    rec = Recorder("step", lambda s: lrs.append(s.lrs()[0]))
    # 10 micro-batches of 8, accumulate=2 -> 5 updates per epoch, 10 in two epochs
    trainer = Trainer(model, opt, loader(x, y, 8), scheduler=sched, plugins=[rec], accumulate=2, max_epochs=2,
                      device="cpu")
    state = trainer.fit()
    assert state.step == 10
    assert sched.last_epoch == 10
    assert lrs == pytest.approx([lr * gamma**k for k in range(1, 11)])
    assert state.history[0]["lr/group0"] == pytest.approx(lr * gamma**5)  # LR after epoch 1: 5 updates
    assert opt.param_groups[0]["lr"] == pytest.approx(lr * gamma**10)


# --------------------------------------------------------------------------- evaluation mode
class ModeProbe(nn.Module):
    """Records (inference_mode, training, grad enabled) on every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.log: list[tuple[bool, bool, bool]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.log.append((torch.is_inference_mode_enabled(), self.training, torch.is_grad_enabled()))
        return self.lin(x)


def test_eval_runs_under_inference_mode_and_eval_then_back_to_train():
    x, y = make_data(48)
    torch.manual_seed(0)
    model = ModeProbe()
    val = loader(x[:24], y[:24], 8)  # 3 eval batches
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader(x, y, 16), val, device="cpu")
    state = trainer.fit()
    train_log, eval_log = model.log[:3], model.log[3:]
    assert train_log == [(False, True, True)] * 3
    assert eval_log == [(True, False, False)] * 3
    assert model.training  # back to train() after the epoch's evaluation

    # evaluate() restores the previous mode, whatever it was
    model.eval()
    metrics = trainer.evaluate(val)
    assert not model.training
    # and its numbers match a plain computation
    with torch.no_grad():
        out = model.lin(x[:24])
    assert metrics["n"] == 24
    assert metrics["acc"] == pytest.approx(float((out.argmax(1) == y[:24]).float().mean()))
    assert metrics["loss"] == pytest.approx(float(F.cross_entropy(out, y[:24])), rel=1e-5)
    assert state.history[0]["val/n"] == 24


def test_eval_restores_train_mode_when_evaluation_fails():
    x, y = make_data(16)
    model = ModeProbe()
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader(x, y, 16), device="cpu")
    bad = [(x, y[:3])]  # mismatched batch: the loss raises
    with pytest.raises(Exception):
        trainer.evaluate(bad)
    assert model.training


# --------------------------------------------------------------------------- bf16 autocast
class _BackwardProbe(torch.autograd.Function):
    """Identity whose backward records whether autocast is on while gradients are computed."""

    log: list[bool] = []

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        _BackwardProbe.log.append(torch.is_autocast_enabled("cpu"))
        return g


class DtypeProbe(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.log: list[tuple[torch.dtype, bool]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        self.log.append((h.dtype, torch.is_autocast_enabled("cpu")))
        return _BackwardProbe.apply(h)


def test_bf16_autocast_covers_forward_and_loss_only():
    x, y = make_data(32)
    torch.manual_seed(0)
    model = DtypeProbe()
    loss_log = []

    def loss_fn(out, target):
        loss_log.append((out.dtype, torch.is_autocast_enabled("cpu")))
        return F.cross_entropy(out, target)

    after = []
    rec = Recorder("after_backward", lambda s: after.append(
        (torch.is_autocast_enabled("cpu"), [p.grad.dtype for p in s.model.parameters()])))
    _BackwardProbe.log.clear()
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader(x, y, 16), loss_fn=loss_fn,
                      plugins=[rec], precision="bf16", device="cpu")
    trainer.fit()
    assert model.log == [(torch.bfloat16, True)] * 2  # forward inside autocast
    assert loss_log == [(torch.bfloat16, True)] * 2  # loss inside autocast
    assert _BackwardProbe.log == [False, False]  # backward outside autocast
    assert after == [(False, [torch.float32, torch.float32])] * 2  # fp32 master grads, autocast off
    assert all(p.dtype == torch.float32 for p in model.parameters())


# --------------------------------------------------------------------------- fp16 GradScaler
class InjectInf(Plugin):
    """Makes the loss of micro-batch ``bad`` infinite, so its gradients overflow."""

    def __init__(self, bad: int) -> None:
        self.bad = bad

    def on_loss(self, state) -> None:
        if state.batch_idx == self.bad and state.epoch == 0:
            state.loss = state.loss * float("inf")


def test_fp16_gradscaler_skips_an_inf_step_without_advancing_the_schedule():
    x, y = make_data(64)
    model, ref = linear(), linear()
    lr, gamma = 0.1, 0.9
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=gamma)
    weights = []  # weights after every update attempt
    skipped = []
    rec = Recorder("step", lambda s: (weights.append(params_of(s.model)), skipped.append(s.step_skipped)))
    trainer = Trainer(model, opt, loader(x, y, 16), scheduler=sched, plugins=[InjectInf(1), rec], precision="16",
                      device="cpu")
    assert trainer.state.scaler.is_enabled()
    init = params_of(model)
    state = trainer.fit()
    assert skipped == [False, True, False, False]
    assert state.skipped_steps == 1
    assert state.step == 3 and sched.last_epoch == 3
    assert opt.param_groups[0]["lr"] == pytest.approx(lr * gamma**3)
    assert trainer.state.scaler.get_scale() == 65536.0 / 2  # backoff after the overflow
    for a, b in zip(weights[0], weights[1]):
        assert torch.equal(a, b)  # the skipped update did not touch the weights
    assert not all(torch.equal(a, b) for a, b in zip(init, weights[0]))

    # reference: fp32 SGD over batches 0, 2, 3 (batch 1 skipped), LR decayed after each real update
    ref_opt = torch.optim.SGD(ref.parameters(), lr=lr)
    for k, b in enumerate([0, 2, 3]):
        ref_opt.param_groups[0]["lr"] = lr * gamma**k
        ref_opt.zero_grad()
        F.cross_entropy(ref(x[16 * b:16 * (b + 1)]), y[16 * b:16 * (b + 1)]).backward()
        ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, atol=5e-3, rtol=0)  # fp16 autocast rounding only


# --------------------------------------------------------------------------- zero_grad
def test_grads_are_none_after_every_update():
    x, y = make_data(96)
    model = linear()
    at_step, at_batch = [], []
    rec_step = Recorder("step", lambda s: at_step.append([p.grad is None for p in s.model.parameters()]))
    rec_batch = Recorder("batch_start", lambda s: at_batch.append(
        (s.batch_idx % 2, [p.grad is None for p in s.model.parameters()])))
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader(x, y, 16),
                      plugins=[rec_step, rec_batch], accumulate=2, device="cpu")
    trainer.fit()
    assert at_step == [[True, True]] * 3
    for pos, none in at_batch:
        # first micro-batch of an update starts from None; the second sees the first one's grads
        assert none == ([True, True] if pos == 0 else [False, False])


# --------------------------------------------------------------------------- DDP no_sync
class _SyncProbe(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wrapper):
        ctx.wrapper = wrapper
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        ctx.wrapper.backward_log.append(ctx.wrapper.in_no_sync)
        return g, None


class FakeDDP(nn.Module):
    """Single-process stand-in for DistributedDataParallel: counts no_sync() entries."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        self.entries = 0
        self.in_no_sync = False
        self.forward_log: list[bool] = []
        self.backward_log: list[bool] = []

    @contextlib.contextmanager
    def no_sync(self):
        self.entries += 1
        self.in_no_sync = True
        try:
            yield
        finally:
            self.in_no_sync = False

    def forward(self, x):
        self.forward_log.append(self.in_no_sync)
        return _SyncProbe.apply(self.module(x), self)


@pytest.mark.parametrize("n_batches,accumulate", [(8, 4), (6, 4), (3, 1)])
def test_no_sync_on_all_but_the_last_micro_batch(n_batches, accumulate):
    x, y = make_data(8 * n_batches)
    model = FakeDDP(linear())
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loader(x, y, 8), accumulate=accumulate,
                      device="cpu")
    trainer.fit()
    expected = []
    for group in groups_of(n_batches, accumulate):
        expected += [True] * (len(group) - 1) + [False]
    assert model.forward_log == expected
    assert model.backward_log == expected  # the backward (where DDP all-reduces) is inside no_sync too
    assert model.entries == expected.count(True)


# --------------------------------------------------------------------------- two-pass optimizer seam
class TwoPass(torch.optim.SGD):
    """SAM-shaped optimizer: discards the first-pass grads, re-computes them with the closure, steps."""

    takes_closure = True

    def __init__(self, params, model, lr: float) -> None:
        super().__init__(params, lr=lr)
        self.model = model
        self.records: list[dict] = []

    def step(self, closure=None):
        assert closure is not None, "the trainer must pass a closure"
        first = [p.grad.clone() for p in self.model.parameters()]
        self.zero_grad(set_to_none=True)
        self.model.tag = "closure"
        try:
            with torch.enable_grad():
                loss = closure()
        finally:
            self.model.tag = "train"
        second = [p.grad.clone() for p in self.model.parameters()]
        self.records.append({"first": first, "second": second, "loss": float(loss)})
        return super().step()


class InputLog(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.tag = "train"
        self.log: list[tuple[str, torch.Tensor]] = []

    def forward(self, x):
        self.log.append((self.tag, x.clone()))
        return self.lin(x)


def test_closure_reruns_forward_and_backward_over_all_micro_batches_of_the_update():
    x, y = make_data(40)
    torch.manual_seed(0)
    model = InputLog()
    ref = InputLog()
    ref.load_state_dict(model.state_dict())
    opt = TwoPass(model.parameters(), model, lr=0.3)
    closure_flags = []
    rec = Recorder("loss", lambda s: closure_flags.append(s.closure_pass))
    # 5 micro-batches of 8, accumulate=2 -> groups {0,1}, {2,3}, {4}
    trainer = Trainer(model, opt, loader(x, y, 8), plugins=[rec], accumulate=2, device="cpu")
    assert trainer.fit().step == 3
    assert len(opt.records) == 3
    assert closure_flags == [False, False, True, True] * 2 + [False, True]

    # the forward inputs of each closure pass are exactly the micro-batches of its update
    log = model.log
    pos = 0
    for group in groups_of(5, 2):
        train_part = log[pos:pos + len(group)]
        closure_part = log[pos + len(group):pos + 2 * len(group)]
        pos += 2 * len(group)
        assert [t for t, _ in train_part] == ["train"] * len(group)
        assert [t for t, _ in closure_part] == ["closure"] * len(group)
        for (_, a), (_, b), j in zip(train_part, closure_part, group):
            assert torch.equal(a, x[8 * j:8 * (j + 1)]) and torch.equal(b, a)
    assert pos == len(log)

    # both passes give the gradient of the group's mean loss; the closure returns that loss
    for rec_, group in zip(opt.records, groups_of(5, 2)):
        idx = torch.cat([torch.arange(8 * j, 8 * (j + 1)) for j in group])
        ref.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ref.lin(x[idx]), y[idx])
        loss.backward()
        for g1, g2, p in zip(rec_["first"], rec_["second"], ref.parameters()):
            torch.testing.assert_close(g1, p.grad, atol=1e-6, rtol=0)
            torch.testing.assert_close(g2, p.grad, atol=1e-6, rtol=0)
        assert rec_["loss"] == pytest.approx(float(loss.detach()), abs=1e-6)
        with torch.no_grad():
            for p in ref.parameters():
                p -= 0.3 * p.grad
