"""Trainer API: plug-in dispatch, argument validation, checkpoint round trips, best/early-stop plug-ins."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from trickbag import runtime
from trickbag.data.sampler import EpochSampler
from trickbag.data.sources import TensorDataset
from trickbag.plugin.events import Event
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import StopReason
from trickbag.train.checkpoint_files import load_checkpoint
from trickbag.train.plugins.checkpoints import Checkpointing
from trickbag.train.plugins.early_stopping import EarlyStop, EarlyStopping
from trickbag.train.plugins.loggers import CSVLogger, TensorBoardLogger
from trickbag.train.plugins.plots import Plots
from trickbag.train.trainer import Trainer

START_EVENTS = [Event.FIT_START, Event.EPOCH_START, Event.BATCH_START, Event.LOSS, Event.AFTER_BACKWARD,
                Event.STEP, Event.EVAL_START]
END_EVENTS = [Event.EPOCH_END, Event.EVAL_END, Event.FIT_END]


def make_data(n: int, d: int = 4, k: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randint(0, k, (n,), generator=g)


def simple_trainer(n=32, bs=8, **kw) -> Trainer:
    x, y = make_data(n)
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    return Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1),
                   DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=bs), device="cpu", **kw)


# --------------------------------------------------------------------------- plug-in dispatch
def _make_logging_plugin(name: str, log: list):
    methods = {f"on_{e.value}": (lambda e: lambda self, state: log.append((name, e)))(e) for e in Event}  # noqa: B023
    return type(f"Log{name}", (Plugin,), methods)()


def test_plugins_run_in_list_order_on_start_events_and_reverse_on_end_events():
    log: list = []
    a, b, c = (_make_logging_plugin(n, log) for n in "ABC")
    x, y = make_data(16)
    t = simple_trainer(plugins=[a, b, c], val_loader=[(x, y)], max_epochs=2)
    t.fit()
    by_event: dict = {}
    for name, e in log:
        by_event.setdefault(e, []).append(name)
    for e in START_EVENTS:
        names = by_event[e]
        assert names == ["A", "B", "C"] * (len(names) // 3), e
    for e in END_EVENTS:
        names = by_event[e]
        assert names == ["C", "B", "A"] * (len(names) // 3), e
    # the sequence of events is the loop's: one FIT_START first, one FIT_END last
    events = [e for _, e in log[::3]]
    assert events[0] == Event.FIT_START and events[-1] == Event.FIT_END
    assert events.count(Event.EPOCH_START) == events.count(Event.EPOCH_END) == 2
    assert events.count(Event.STEP) == 8
    assert events.index(Event.EVAL_START) < events.index(Event.EVAL_END) < events.index(Event.EPOCH_END)


def test_only_overridden_hooks_are_called(monkeypatch):
    calls = []
    # instrument the base class: a trainer that calls non-overridden hooks would record them
    for e in Event:
        monkeypatch.setattr(Plugin, f"on_{e.value}", (lambda e: lambda self, state: calls.append(e))(e))  # noqa: B023

    class OnlyStep(Plugin):
        def __init__(self):
            self.steps = 0

        def on_step(self, state):
            self.steps += 1

    p = OnlyStep()
    assert [e for e in Event if p.handles(e)] == [Event.STEP]
    t = simple_trainer(plugins=[p])
    t.fit()
    assert p.steps == 4
    assert calls == []


def test_plugin_that_stops_ends_the_run_with_its_reason():
    class StopAfterFirstEpoch(Plugin):
        def on_epoch_end(self, state):
            state.stop(StopReason.REQUESTED, "enough")

    t = simple_trainer(plugins=[StopAfterFirstEpoch()], max_epochs=5)
    s = t.fit()
    assert (s.epoch, s.should_stop, s.stop_reason, s.stop_detail, len(s.history)) == (
        1, True, StopReason.REQUESTED, "enough", 1)
    assert s.stop_message == "stopped by a plug-in: enough"


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"precision": "fp16"}, "precision"),
        ({"accumulate": 0}, "accumulate"),
        ({"max_epochs": 0}, "max_epochs"),
        ({"clip": 0.0}, "clip"),
        ({"mode": "up"}, "mode"),
    ],
)
def test_bad_arguments_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        simple_trainer(**kw)


def test_a_non_plugin_is_refused_with_its_type():
    with pytest.raises(TypeError, match="Plugin.*object"):
        simple_trainer(plugins=[object()])


# --------------------------------------------------------------------------- checkpoint round trips
class Net(nn.Module):
    """BatchNorm (buffers), dropout (global RNG) and momentum SGD (optimizer state) all need restoring."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.body(x))


def _noise(x: torch.Tensor, generator=None) -> torch.Tensor:  # the sample's generator, else the global RNG
    return x + 0.1 * torch.randn(x.shape, generator=generator)


def build_run(tmp_path=None, *, max_epochs=2, n=40, bs=8, accumulate=2, plugins=(), sampler=True,
              precision="32") -> Trainer:
    """A fresh trainer with a seeded resumable loader; different global RNG than any other build."""
    x, y = make_data(n)
    ds = TensorDataset(x, y, augment=_noise)
    if sampler:
        train = DataLoader(ds, batch_size=bs, sampler=EpochSampler(n, seed=5), generator=runtime.make_generator(5))
    else:
        train = DataLoader(ds, batch_size=bs, shuffle=False)
    val = DataLoader(TensorDataset(x[:16], y[:16]), batch_size=8)
    torch.manual_seed(1234)  # a fresh model's init: overwritten by a loaded checkpoint
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=1e-3)
    steps_per_epoch = math.ceil(math.ceil(n / bs) / accumulate)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps_per_epoch * max_epochs)
    return Trainer(model, opt, train, val, scheduler=sched, plugins=list(plugins), max_epochs=max_epochs,
                   accumulate=accumulate, device="cpu", precision=precision)


@pytest.fixture
def deterministic():
    runtime.configure_determinism(True)
    yield
    runtime.configure_determinism(False)


def assert_same_training(a: Trainer, b: Trainer) -> None:
    for (k, p), (_, q) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(p, q), k
    sa, sb = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    for k in sa:
        assert torch.equal(sa[k]["momentum_buffer"], sb[k]["momentum_buffer"])
    assert a.state.scheduler.last_epoch == b.state.scheduler.last_epoch
    assert a.state.scaler.state_dict() == b.state.scaler.state_dict()
    assert a.state.skipped_steps == b.state.skipped_steps
    assert (a.state.epoch, a.state.step) == (b.state.epoch, b.state.step)
    keys = ("epoch", "step", "train/loss", "train/acc", "val/loss", "val/acc", "lr/group0")
    assert [{k: h[k] for k in keys} for h in a.state.history] == [{k: h[k] for k in keys} for h in b.state.history]


@pytest.mark.parametrize("sampler", [True, False], ids=["epoch_sampler", "plain_loader"])
def test_train_two_epochs_equals_one_plus_save_load_plus_one(tmp_path, deterministic, sampler):
    runtime.seed_everything(0)
    full = build_run(sampler=sampler)
    full.fit()

    runtime.seed_everything(0)
    first = build_run(sampler=sampler)
    first.state.max_epochs = 1  # same schedule length as the full run, stop after one epoch
    first.fit()
    path = first.save_checkpoint(tmp_path / "one.pt")

    runtime.seed_everything(99)  # the resumed process starts from a different RNG state
    second = build_run(sampler=sampler)
    second.load_state_dict(load_checkpoint(path))
    assert second.state.epoch == 1
    second.fit()
    assert_same_training(full, second)


@pytest.mark.parametrize(
    "resume_step,sampler",
    [(2, True), (3, True), (4, True), (2, False), (4, False)],
    ids=["mid_epoch1", "end_of_epoch1", "mid_epoch2", "plain_loader_mid_epoch1", "plain_loader_mid_epoch2"],
)
def test_mid_epoch_checkpoint_resume_is_identical(tmp_path, deterministic, resume_step, sampler):
    """A plain DataLoader (no generator) draws from the global RNG when its iterator is created: the
    resumed run must restore the RNG after that, or dropout/augmentation diverge."""
    # 5 micro-batches, accumulate=2 -> updates {0,1}, {2,3}, {4} -> 3 updates per epoch, 6 in all
    runtime.seed_everything(0)
    ckpts = Checkpointing(tmp_path / "ckpt", every_steps=1, keep=100)
    full = build_run(plugins=[ckpts], sampler=sampler)
    full.fit()
    assert full.state.step == 6
    step_file = tmp_path / "ckpt" / f"step-{resume_step:08d}.pt"
    ckpt = load_checkpoint(step_file)
    assert ckpt["counters"]["step"] == resume_step

    runtime.seed_everything(99)
    resumed = build_run(sampler=sampler)
    resumed.load_state_dict(ckpt)
    resumed.fit()
    assert_same_training(full, resumed)


class InfLossAt(Plugin):
    """Makes the loss of micro-batch ``batch_idx`` infinite (in every epoch): an fp16 overflow."""

    def __init__(self, batch_idx):
        self.batch_idx = batch_idx

    def on_loss(self, state):
        if state.batch_idx == self.batch_idx:
            state.loss = state.loss * float("inf")


def test_fp16_mid_epoch_resume_restores_the_grad_scaler(tmp_path, deterministic):
    runtime.seed_everything(0)
    full = build_run(plugins=[InfLossAt(1), Checkpointing(tmp_path, every_steps=1, keep=100)], precision="16")
    full.fit()
    assert full.state.skipped_steps == 2 and full.state.scaler.get_scale() == 2.0**14  # halved twice
    runtime.seed_everything(99)
    resumed = build_run(plugins=[InfLossAt(1)], precision="16")
    ckpt = load_checkpoint(tmp_path / "step-00000001.pt")  # mid epoch 1, after its overflow (scale 2**15)
    assert ckpt["scaler"]["scale"] == 2.0**15
    resumed.load_state_dict(ckpt)
    resumed.fit()
    assert_same_training(full, resumed)


# --------------------------------------------------------------------------- built-in plug-ins
class ScriptedMetric(Plugin):
    """Puts a scripted value under ``val/x`` at each epoch end (before plug-ins earlier in the list)."""

    def __init__(self, values):
        self.values = list(values)

    def on_epoch_end(self, state):
        state.metrics["val/x"] = self.values[state.epoch]


@pytest.mark.parametrize("mode", ["min", "max"])
def test_checkpointing_keeps_last_and_best_by_mode(tmp_path, mode):
    values = [3.0, 1.0, 4.0, 2.0]
    best_epoch = values.index(min(values) if mode == "min" else max(values))
    ck = Checkpointing(tmp_path, monitor="val/x", mode=mode, extra={"tag": "run-a"})
    # ScriptedMetric is later in the list, so it runs first on the (reversed) EPOCH_END event
    t = simple_trainer(plugins=[ck, ScriptedMetric(values)], max_epochs=4)
    t.fit()
    last, best = load_checkpoint(tmp_path / "last.pt"), load_checkpoint(tmp_path / "best.pt")
    assert last["counters"]["epoch"] == 4 and last["tag"] == "run-a"
    assert best["counters"]["epoch"] == best_epoch + 1
    assert ck.best == values[best_epoch] and ck.best_epoch == best_epoch
    assert last["plugins"]["Checkpointing"]["best"] == values[best_epoch]
    assert best["weights_only"] and "plugins" not in best and "optimizer" not in best  # best.pt: weights only
    for k, v in best["model"].items():
        assert v.shape == t.model.state_dict()[k].shape
    for k, v in t.model.state_dict().items():
        assert torch.equal(last["model"][k], v)


def naive_early_stop(values, patience, mode, min_delta):
    """Index of the check at which training stops, or None."""
    best, bad = None, 0
    for i, v in enumerate(values):
        better = best is None or (v > best + min_delta if mode == "max" else v < best - min_delta)
        if better:
            best, bad = v, 0
        else:
            bad += 1
        if bad >= patience:
            return i
    return None


@pytest.mark.parametrize("mode", ["min", "max"])
@pytest.mark.parametrize("min_delta", [0.0, 0.15])  # values on a 0.1 grid: 0.15 matters
@pytest.mark.parametrize("patience", [1, 3])
def test_early_stopping_rule_matches_a_naive_reference(mode, min_delta, patience):
    g = torch.Generator().manual_seed(patience * 10 + int(min_delta * 100) + (mode == "max"))
    for _ in range(20):
        values = (torch.rand(12, generator=g).round(decimals=1)).tolist()
        expected = naive_early_stop(values, patience, mode, min_delta)
        rule = EarlyStopping(patience=patience, mode=mode, min_delta=min_delta, monitor="m")
        got = next((i for i, v in enumerate(values) if rule.step(v)), None)
        assert got == expected, values
        if got is not None:
            assert rule.reason.startswith(f"m did not improve for {patience} evaluations")


def test_early_stopping_state_round_trip_and_nan():
    a = EarlyStopping(patience=2, mode="max")
    assert a.step(0.5) is False and a.step(float("nan")) is False  # NaN is never an improvement
    b = EarlyStopping(patience=2, mode="max")
    b.load_state_dict(a.state_dict())
    assert b.step(0.4) is True and b.reason is not None


@pytest.mark.parametrize("kw", [{"patience": 0}, {"mode": "best"}, {"min_delta": -1.0}])
def test_early_stopping_rejects_bad_arguments(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        EarlyStopping(**kw)


def test_early_stop_plugin_stops_the_run_and_reports_why():
    values = [0.5, 0.7, 0.6, 0.65, 0.69, 0.9]
    expected_stop = naive_early_stop(values, 3, "max", 0.0)
    t = simple_trainer(plugins=[EarlyStop("val/x", "max", patience=3), ScriptedMetric(values)], max_epochs=6)
    s = t.fit()
    assert len(s.history) == expected_stop + 1 == 5
    assert s.stop_reason is StopReason.EARLY_STOPPING
    assert s.stop_message.startswith("early stopping: val/x did not improve for 3 evaluations")
    assert "best 0.7" in s.stop_detail


def test_loggers_record_one_row_per_update_when_an_fp16_step_is_skipped(tmp_path):
    """A skipped update keeps the previous step number: logging it again would duplicate that step."""
    import csv

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    csv_logger, plots = CSVLogger(tmp_path / "m.csv", every_steps=1), Plots(tmp_path)
    tb = TensorBoardLogger(tmp_path / "tb", every_steps=1)
    t = simple_trainer(plugins=[InfLossAt(1), csv_logger, plots, tb], precision="16")
    s = t.fit()
    assert (s.step, s.skipped_steps) == (3, 1)
    rows = [r for r in csv.DictReader((tmp_path / "m.csv").open()) if r["train/step_loss"]]
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    assert len(plots.lrs) == 3  # lr.png: one point per optimizer update
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("train/step_loss")] == [1, 2, 3]


def test_epoch_metrics_report_lr_of_every_param_group_throughput_and_sample_weighted_loss():
    x, y = make_data(30)  # batches of 8, 8, 8, 6: the mean must weight by batch size
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD([{"params": model[0].parameters(), "lr": 0.1},
                           {"params": model[2].parameters(), "lr": 0.01}], lr=0.5)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    seen = []

    class RecordLoss(Plugin):
        def on_loss(self, state):
            _, yb = state.batch
            seen.append((float(state.loss.detach()), int((state.output.argmax(1) == yb).sum()), len(yb)))

    t = Trainer(model, opt, DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8), scheduler=sched,
                plugins=[RecordLoss()], device="cpu")
    m = t.fit().history[0]
    assert m["lr/group0"] == pytest.approx(0.1 * 0.5**4) and m["lr/group1"] == pytest.approx(0.01 * 0.5**4)
    assert m["train/samples_per_s"] > 0 and m["train/epoch_time_s"] > 0
    assert [b for _, _, b in seen] == [8, 8, 8, 6]
    assert m["train/loss"] == pytest.approx(sum(loss * b for loss, _, b in seen) / 30, rel=1e-6)
    assert m["train/acc"] == pytest.approx(sum(c for _, c, _ in seen) / 30)


def test_a_plugin_vetoes_an_update_through_the_state_and_a_second_eval_weights_owner_is_refused():
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.plugin.interface import Plugin
    from trickbag.train.trainer import Trainer

    class VetoOdd(Plugin):  # skip every other update
        def __init__(self):
            self.calls = 0

        def on_after_backward(self, state):
            self.calls += 1
            if self.calls % 2:
                state.veto_update("odd")

    torch.manual_seed(0)
    x, y = torch.randn(64, 3), torch.randint(0, 2, (64,))
    model = torch.nn.Linear(3, 2)
    ref = copy.deepcopy(model)
    t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), DataLoader(TensorDataset(x, y), batch_size=8),
                plugins=[VetoOdd()], device="cpu", progress=False)
    s = t.fit()
    assert (s.step, s.skipped_steps) == (4, 4)  # 8 batches: 4 applied, 4 vetoed
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)  # the reference: plain SGD on the even batches only
    for i in range(1, 8, 2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(x[8 * i:8 * i + 8]), y[8 * i:8 * i + 8]).backward()
        opt.step()
    for a, b in zip(ref.parameters(), model.parameters()):
        torch.testing.assert_close(a, b)
    s.provide_eval_weights(dict, owner="mine")
    s.provide_eval_weights(dict, owner="mine")  # the same owner again (a second fit): fine
    with pytest.raises(ValueError, match="theirs and mine both provide"):
        s.provide_eval_weights(dict, owner="theirs")


def test_add_plugin_refuses_a_plugin_that_needs_build_time_setup():
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.plugin.interface import Plugin
    from trickbag.train.trainer import Trainer

    class ChangesLoss(Plugin):
        def configure(self, ctx):
            ctx.loss_fn = torch.nn.functional.mse_loss

    model = torch.nn.Linear(3, 2)
    t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1),
                DataLoader(TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,))), batch_size=4), device="cpu")
    with pytest.raises(TypeError, match="pass it in Trainer\\(plugins=\\[...\\]\\)"):
        t.add_plugin(ChangesLoss())
    t.add_plugin(Plugin())  # nothing to set up: fine
