"""A hand-built Trainer with ``run_dir=``: the run folder the command line writes, refused take-overs, and a
``kill -9`` followed by ``fit(resume=True)`` ending bit for bit where an uninterrupted run ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from reliability._helpers import csv_without_times, load, training_state_differences
from torch.utils.data import DataLoader, TensorDataset

from trickbag.errors import TrickbagError
from trickbag.train.plugins.run_folder import RunLock
from trickbag.train.trainer import Trainer

SCRIPT = Path(__file__).with_name("run_dir_script.py")


def _script(run: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), str(run), *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("ref") / "run"
    proc = _script(run)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run


def test_the_run_folder_holds_what_a_command_line_run_writes(reference):
    names = {p.relative_to(reference).as_posix() for p in reference.rglob("*")}
    assert {"metrics.csv", "summary.txt", "checkpoints/last.pt", "checkpoints/best.pt", ".lock"} <= names
    assert any(n.startswith("checkpoints/step-") for n in names)
    last = load(reference / "checkpoints" / "last.pt")
    assert last["counters"]["epoch"] == 3 and set(last["plugins"]) >= {"ema", "mix", "multiscale", "run_folder"}
    summary = (reference / "summary.txt").read_text()
    assert "trained 3 of 3 epochs, 18 updates" in summary and "best val/acc" in summary
    rows = csv_without_times(reference / "metrics.csv")
    assert "val/acc" in rows[0] and len(rows) > 3


@pytest.mark.parametrize("kill_at, picked_up", [(6, 4), (13, 12)])  # step-4.pt in epoch 1; last.pt after epoch 2
def test_kill_9_then_fit_resume_is_bit_identical(tmp_path, reference, kill_at, picked_up):
    run = tmp_path / "run"
    killed = _script(run, "--kill-at", str(kill_at))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    resumed = _script(run, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"start step={picked_up}" in resumed.stdout and "done epoch=3 step=18" in resumed.stdout
    assert f"resuming {run}" in resumed.stderr
    for name in ("last.pt", "best.pt"):
        assert training_state_differences(load(reference / "checkpoints" / name),
                                          load(run / "checkpoints" / name)) == [], name
    assert csv_without_times(reference / "metrics.csv") == csv_without_times(run / "metrics.csv")


def _trainer(run_dir, **kw) -> Trainer:
    torch.manual_seed(0)
    x, y = torch.randn(32, 3), torch.randint(0, 2, (32,))
    model = torch.nn.Linear(3, 2)
    return Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), DataLoader(TensorDataset(x, y), batch_size=8),
                   max_epochs=1, device="cpu", run_dir=run_dir, **kw)


def test_a_folder_holding_a_run_is_not_overwritten_and_resume_needs_a_folder(tmp_path):
    _trainer(tmp_path / "r", progress=False).fit()
    before = (tmp_path / "r" / "checkpoints" / "last.pt").read_bytes()
    with pytest.raises(TrickbagError, match="already holds a run.*fit\\(resume=True\\)"):
        _trainer(tmp_path / "r", progress=False).fit()
    assert (tmp_path / "r" / "checkpoints" / "last.pt").read_bytes() == before
    with pytest.raises(TrickbagError, match="needs the Trainer's run_dir"):
        _trainer(None).fit(resume=True)
    state = _trainer(tmp_path / "r", progress=False).fit(resume=True)  # finished: nothing left to train
    assert state.epoch == 1


def test_a_folder_in_use_is_refused(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; "
                              "from trickbag.train.plugins.run_folder import RunLock; "
                              f"RunLock({str(tmp_path / 'r')!r}).acquire(); print('held', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(TrickbagError, match=f"in use by process {child.pid}"):
            _trainer(tmp_path / "r", progress=False).fit()
    finally:
        child.kill()
        child.wait()
    with RunLock(tmp_path / "r"):  # released by the refused fit and by the killed holder
        pass


def test_progress_lines_and_silence(tmp_path, capfd):
    _trainer(tmp_path / "a", progress=False).fit()
    assert capfd.readouterr().err == ""
    _trainer(tmp_path / "b").fit()  # a run folder, not a terminal: one line per epoch
    assert "epoch 1/1" in capfd.readouterr().err
    _trainer(None).fit()  # no folder, not a terminal: quiet
    assert capfd.readouterr().err == ""
