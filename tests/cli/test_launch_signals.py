"""The launcher's signal relay (``trickbag train dist.nproc=N``), against a stand-in for torchrun.

The stand-in is a process in a session of its own with two children that record the signals they receive;
the launcher's relay must pass each worker one signal (SIGHUP as SIGTERM: the job must not outlive its
terminal) and end the whole job at once on a second one. The end-to-end runs are in
``tests/reliability/test_interrupt_torchrun.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trickbag import launch

STAND_IN = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    child = '''
    import os, signal, sys, time
    def got(signum, frame):
        with open(sys.argv[1], "a") as fh:
            fh.write(signal.Signals(signum).name + "\\\\n")
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, got)
    open(sys.argv[1] + ".ready", "w").close()
    for _ in range(600):
        time.sleep(0.05)
        if os.path.exists(sys.argv[1]) and sys.argv[2] != "stay":
            sys.exit(0)
    '''
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # like torchrun, it must not be the one that is signalled
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kids = [subprocess.Popen([sys.executable, "-c", child, sys.argv[1] + f"/w{i}", sys.argv[2]]) for i in range(2)]
    sys.exit(max(k.wait() for k in kids))
""")


def _start(tmp_path: Path, stay: bool = False) -> subprocess.Popen:
    """The stand-in; ``stay``: its workers do not end when signalled (only a kill ends them)."""
    proc = subprocess.Popen([sys.executable, "-c", STAND_IN, str(tmp_path), "stay" if stay else "go"],
                            start_new_session=True)
    deadline = time.time() + 60
    while not all((tmp_path / f"w{i}.ready").exists() for i in range(2)):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("sig, passed", [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM"),
                                         (signal.SIGHUP, "SIGTERM")])
def test_one_signal_reaches_every_worker_once(tmp_path, sig, passed):
    proc = _start(tmp_path)
    relay = launch._SignalRelay(proc)
    try:
        with relay:
            os.kill(os.getpid(), sig)  # the launcher is signalled (Python runs the handler here)
            assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert relay.signum == sig
    for i in range(2):
        assert (tmp_path / f"w{i}").read_text().split() == [passed]
    assert signal.getsignal(sig) is not relay._handle  # the previous handler is back


def test_a_second_signal_ends_the_job_at_once(tmp_path):
    proc = _start(tmp_path, stay=True)
    workers = launch._children(proc.pid)
    assert len(workers) == 2
    relay = launch._SignalRelay(proc)
    try:
        with relay:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.3)
            assert proc.poll() is None  # the first signal asked; the job goes on
            os.kill(os.getpid(), signal.SIGTERM)
            assert proc.wait(timeout=30) == -signal.SIGKILL
        time.sleep(0.3)
        assert not [w for w in workers if _alive(w)]  # its workers went with it (the whole process group)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"  # a zombie has ended (its parent has not collected it)


def test_children_are_found_from_proc():
    kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert kid.pid in launch._children(os.getpid())
    finally:
        kid.kill()
        kid.wait()
