"""SIGINT / SIGTERM: finish the update in progress, checkpoint, say how to resume; a second one exits at once.

The signals are real: the test kill-switch plug-in (``TRICKBAG_TEST_KILL_AT=sigint:N``) sends them to the process with
``os.kill`` after update N, and the handler trickbag installed receives them. The runs are
in-process (pytest runs tests in the main thread, where Python delivers signals).
"""

from __future__ import annotations

import signal
import threading

import pytest
import torch

from trickbag.train.plugins.signals import GracefulInterrupt

from ._helpers import load, run_inprocess, training_state_differences, write_recipe
from .killswitch import PLUGIN, KillSwitch


@pytest.mark.parametrize("sig", ["sigint", "sigterm"])
def test_first_signal_stops_after_the_update_checkpoints_and_resume_is_exact(tmp_path, reference_run, monkeypatch,
                                                                             capsys, sig):
    recipe = write_recipe(tmp_path)
    run = tmp_path / "runs" / "k"
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    monkeypatch.setenv("TRICKBAG_TEST_KILL_AT", f"{sig}:11")  # epoch 2, after its 2nd update
    rc, out, err = run_inprocess(
        ["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=k", PLUGIN, "--quiet"], capsys
    )
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # restored
    name = sig.upper()
    assert rc == 128 + getattr(signal, name), err  # 130 for SIGINT, 143 for SIGTERM (pre-emption), as shells report
    assert f"trickbag: {name} received: finishing the current update" in err
    assert err.strip().splitlines()[-1] == f"trickbag: interrupted; continue with: trickbag train --resume {run}"
    assert "Traceback" not in err
    # the signal came during update 11's STEP: update 12 is the one in progress when it is seen
    last = load(run / "checkpoints" / "last.pt")
    assert last["counters"]["step"] == 12 and last["counters"]["epoch"] == 1 and last["counters"]["batch_idx"] == 3
    assert len(last["history"]) == 1  # epoch 2 was not finished, so not evaluated or logged

    monkeypatch.delenv("TRICKBAG_TEST_KILL_AT")
    rc, out, err = run_inprocess(["train", "--resume", str(run), "--quiet"], capsys)
    assert rc == 0, err
    assert "from last.pt at epoch 2, update 12" in out
    got, ref = load(run / "checkpoints" / "last.pt"), load(reference_run / "checkpoints" / "last.pt")
    assert training_state_differences(ref, got) == []


def test_second_sigint_exits_at_once_without_a_checkpoint(tmp_path, monkeypatch, capsys):
    recipe = write_recipe(tmp_path)
    run = tmp_path / "runs" / "k"
    before = signal.getsignal(signal.SIGINT)
    monkeypatch.setenv("TRICKBAG_TEST_KILL_AT", "sigint:3,sigint:3")
    rc, out, err = run_inprocess(
        ["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=k", PLUGIN, "--quiet"], capsys
    )
    assert rc == 130
    assert "second SIGINT: stopping now" in err and err.strip().splitlines()[-1] == "trickbag: interrupted"
    assert signal.getsignal(signal.SIGINT) is before
    # no checkpoint was written for the interruption (none existed yet at update 3)
    assert not (run / "checkpoints").exists() or not any((run / "checkpoints").iterdir())


def test_second_sigterm_exits_at_once_with_status_143(tmp_path, monkeypatch, capsys):
    recipe = write_recipe(tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setenv("TRICKBAG_TEST_KILL_AT", "sigterm:5,sigterm:5")
    from trickbag.cli import main

    with pytest.raises(SystemExit) as info:
        main(["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=k", PLUGIN, "--quiet"])
    assert info.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert "second SIGTERM" in capsys.readouterr().err


def test_signal_during_evaluation_stops_at_the_epoch_boundary(tmp_path):
    """A signal while evaluating: the epoch is complete, so the run stops there (no mid-epoch
    checkpoint, no second evaluation or duplicate history row when resumed)."""
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.data.sampler import EpochSampler
    from trickbag.plugin.interface import Plugin
    from trickbag.train.plugins.checkpoints import Checkpointing
    from trickbag.train.trainer import Trainer

    class SignalInEval(Plugin):
        def on_eval_start(self, state):
            if state.epoch == 0:
                signal.raise_signal(signal.SIGINT)

    torch.manual_seed(0)
    x, y = torch.randn(40, 4), torch.randint(0, 2, (40,))
    ds = TensorDataset(x, y)
    model = torch.nn.Linear(4, 2)
    interrupt = GracefulInterrupt(out=None)
    ckpt = Checkpointing(tmp_path / "ckpt")
    t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1),
                DataLoader(ds, batch_size=8, sampler=EpochSampler(40, seed=0)), DataLoader(ds, batch_size=40),
                plugins=[SignalInEval(), interrupt, ckpt], device="cpu", max_epochs=3)
    with interrupt:
        state = t.fit()
    assert state.stop_message.startswith("interrupted: SIGINT")
    assert state.epoch == 1 and len(state.history) == 1  # epoch 1 finished and was evaluated once
    c = load(tmp_path / "ckpt" / "last.pt")["counters"]
    assert (c["epoch"], c["batch_idx"], c["step"]) == (1, 0, 5)


def test_handlers_are_installed_only_in_the_main_thread_and_restored():
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    result = {}

    def worker():
        gi = GracefulInterrupt(out=None)
        result["installed"] = gi.install()  # signal.signal would raise ValueError outside the main thread
        gi.restore()

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    assert result == {"installed": False}
    with GracefulInterrupt(out=None) as gi:
        assert gi.installed
        assert signal.getsignal(signal.SIGINT) == gi._handle and signal.getsignal(signal.SIGTERM) == gi._handle
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_forked_worker_ignores_the_signal():
    """DataLoader workers inherit the handler; only the process that installed it reacts."""
    gi = GracefulInterrupt(out=None)
    gi._pid = -1  # as seen from a forked child, the installing pid is another process
    gi._handle(signal.SIGINT, None)
    gi._handle(signal.SIGINT, None)  # would raise KeyboardInterrupt in the main process
    assert not gi.requested


def test_kill_switch_parses_and_rejects_specs():
    assert KillSwitch(" ").actions == []
    ks = KillSwitch("step:3,write:last.pt,sigterm:2")
    assert ks.actions == [("step", "3"), ("write", "last.pt"), ("sigterm", "2")]
    for bad in ("step", "step:x", "explode:1", "eval:"):
        with pytest.raises(ValueError, match="TRICKBAG_TEST_KILL_AT"):
            KillSwitch(bad)


def test_a_launched_worker_signalled_while_it_builds_stops_after_its_first_update_and_saves(tmp_path, monkeypatch,
                                                                                           capsys):
    """Under ``dist.nproc=N`` the launcher passes a Ctrl-C on at once, perhaps while a rank still builds: the rank
    holds it, trains one update, saves and ends cleanly (0: its launcher reports 130 / 143 for the job)."""
    import os

    import trickbag.runs.run as run_module

    recipe = write_recipe(tmp_path)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    real = run_module.preflight

    def signalled_preflight(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives before the run's interrupt handler exists
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "preflight", signalled_preflight)
    monkeypatch.setenv("TRICKBAG_LAUNCHED", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    try:
        rc, out, err = run_inprocess(
            ["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=k", "--quiet"], capsys)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    assert rc == 0, err
    assert "SIGTERM received: finishing the current update" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("trickbag: interrupted; continue with: trickbag train --resume")
    assert load(tmp_path / "runs" / "k" / "checkpoints" / "last.pt")["counters"]["step"] == 1
