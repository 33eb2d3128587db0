"""One owner per run directory: two runs started together on one name, a ``--resume`` while the run
still trains, and a lock left by a killed process (the OS released it: it never blocks)."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml

from trickbag.runs.naming import LOCK, RunLock

ARGS = ["train", "digits", "model.name=mlp", "run.plots=false", "log.tensorboard=false", "run.name=c"]


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.Popen([sys.executable, "-m", "trickbag", *ARGS, f"run.dir={tmp_path}", *extra], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _epoch_rows(run: Path) -> int:
    with open(run / "metrics.csv", newline="") as fh:
        return sum(1 for row in csv.DictReader(fh) if row["val/loss"])


def _seed_of(run: Path) -> int:
    return yaml.safe_load((run / "recipe.yaml").read_text())["train"]["seed"]


def test_two_runs_started_together_on_one_name_one_is_refused_and_the_folder_is_one_run(tmp_path):
    procs = {seed: _start(tmp_path, f"train.seed={seed}", "train.epochs=3", "--quiet") for seed in (11, 22)}
    results = {seed: (p.wait(timeout=300), p.stderr.read()) for seed, p in procs.items()}
    codes = sorted(rc for rc, _ in results.values())
    assert codes == [0, 2], results
    (winner,) = [s for s, (rc, _) in results.items() if rc == 0]
    (loser,) = [s for s, (rc, _) in results.items() if rc == 2]
    line = results[loser][1].strip()
    assert "\n" not in line and line.startswith("trickbag: error: run directory")
    assert f"in use by process {procs[winner].pid}" in line or "already exists" in line, line
    run = tmp_path / "c"
    assert _seed_of(run) == winner  # the folder is the winner's run alone
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["recipe"]["train"]["seed"] == winner and ckpt["counters"]["epoch"] == 3
    assert _epoch_rows(run) == 3


def test_resume_while_the_run_trains_is_refused_naming_its_pid_and_harms_nothing(tmp_path):
    proc = _start(tmp_path, "train.epochs=1000", "run.progress=false")
    run = tmp_path / "c"
    deadline = time.time() + 240
    while not (run / "checkpoints" / "last.pt").exists():
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read() if proc.poll() is not None else ""
        time.sleep(0.1)
    for argv in (["train", "--resume", str(run), "--quiet"], [*ARGS, f"run.dir={tmp_path}", "--quiet"]):
        other = subprocess.run([sys.executable, "-m", "trickbag", *argv], cwd=tmp_path, capture_output=True, text=True,
                               timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
        line = other.stderr.strip()
        assert other.returncode == 2 and "\n" not in line, other.stderr
        assert line.startswith("trickbag: error: run directory")
        assert f"in use by process {proc.pid}" in line or ("already exists" in line and "--resume" not in argv), line
    proc.send_signal(signal.SIGINT)  # the original trained on undisturbed; now stop it where it is
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    ckpt = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["recipe"]["train"]["epochs"] == 1000  # no other process wrote into it
    done = ckpt["counters"]["epoch"]
    assert 1 <= done < 1000 and _epoch_rows(run) == done


def test_a_lock_file_left_by_a_dead_process_does_not_block(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / LOCK).write_text("999999")  # what a killed run leaves: the file, but no lock on it
    with RunLock(run):
        assert (run / LOCK).read_text() == str(os.getpid())  # the holder is named for the next one
    child = subprocess.run([sys.executable, "-c", "import sys; from trickbag.runs.naming import RunLock; "
                            f"RunLock({str(run)!r}).acquire(); print('held')"], capture_output=True, text=True,
                           timeout=120)
    assert child.stdout.strip() == "held", child.stderr


def test_a_held_lock_is_refused_in_another_process_naming_the_holder(tmp_path):
    run = tmp_path / "r"
    with RunLock(run):
        child = subprocess.run([sys.executable, "-c", "from trickbag.runs.naming import RunLock; "
                                f"RunLock({str(run)!r}).acquire()"], capture_output=True, text=True, timeout=120)
    assert child.returncode != 0
    assert f"run directory {str(run)!r} is in use by process {os.getpid()}" in child.stderr
