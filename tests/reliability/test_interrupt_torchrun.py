"""Ctrl-C and pre-emption (SIGTERM) of ``trickbag train dist.nproc=2``: exit 130 / 143, one line, resumable.

A terminal's Ctrl-C reaches the whole foreground process group (the launcher, torchrun and every
rank); a scheduler's pre-emption sends SIGTERM to the launcher. Either way every rank finishes the
update in progress, ``last.pt`` is written there, and the launcher ends with 128 + the signal's number,
one line naming the resume command, no torchrun traceback and no "job failed". The runs are real
subprocesses in a session of their own, killed whole on a hard timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as torch_dist

from ._helpers import load

pytestmark = pytest.mark.skipif(not torch_dist.is_available() or not torch_dist.is_gloo_available(),
                                reason="torch built without distributed/gloo support")

ARGS = ["train", "digits", "dist.nproc=2", "train.epochs=40", "log.tensorboard=false", "run.plots=false",
        "run.progress=false", "--quiet"]
HARD_TIMEOUT_S = 240


def _env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "trickbag", *args], cwd=cwd, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _finish(proc: subprocess.Popen) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=HARD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"hung for {HARD_TIMEOUT_S} s\n{err[-3000:]}")


def _wait_for_training(proc: subprocess.Popen, run: Path) -> None:
    deadline = time.time() + HARD_TIMEOUT_S
    while not (run / "checkpoints" / "last.pt").exists():  # the first epoch ended: every rank is training
        if proc.poll() is not None or time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"the run ended before training: {proc.communicate()[1][-3000:]}")
        time.sleep(0.2)


@pytest.mark.parametrize("sig, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False)],
                         ids=["ctrl-c-to-the-group", "sigterm-to-the-launcher"])
def test_interrupted_two_process_run_exits_with_the_signal_code_in_one_line_and_resumes(tmp_path, sig, to_group):
    run = tmp_path / "runs" / "d"
    proc = _start([*ARGS, f"run.dir={tmp_path / 'runs'}", "run.name=d"], tmp_path)
    try:
        _wait_for_training(proc, run)
        if to_group:
            os.killpg(proc.pid, sig)  # what a terminal's Ctrl-C does: every process of the foreground group
        else:
            os.kill(proc.pid, sig)  # a scheduler pre-empting the job signals the command it started
        out, err = _finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, err[-3000:]
    for bad in ("Traceback", "SignalException", "job failed", "ChildFailedError", "error:"):
        assert bad not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == f"trickbag: interrupted; continue with: trickbag train --resume {run}", err[-3000:]
    assert sum("interrupted" in line for line in lines) == 1, err[-3000:]  # one line, not one per rank
    last = load(run / "checkpoints" / "last.pt")["counters"]
    assert last["world_size"] == 2 and last["step"] > 0
    stopped_at = last["step"]

    resumed = _start(["train", "--resume", str(run), "train.epochs=" + str(last["epoch"] + 1), "--quiet"], tmp_path)
    out, err = _finish(resumed)
    assert resumed.returncode == 0, err[-3000:]
    assert f"update {stopped_at}" in out, out  # it continued where the interruption left it
    assert load(run / "checkpoints" / "last.pt")["counters"]["step"] > stopped_at
