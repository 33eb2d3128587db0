"""Start ``trickbag train`` under PyTorch's launcher (torchrun) on this machine: ``dist.nproc=N``.

``trickbag train recipe.yaml dist.nproc=4`` runs the same command as::

    python -m torch.distributed.run --nnodes 1 --nproc-per-node 4 \\
        --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:0 --rdzv-id <random> --max-restarts 0 \\
        -m trickbag train recipe.yaml dist.nproc=4 run.name=<fixed name>

Port 0 on 127.0.0.1: torchrun's rendezvous store binds a free port chosen by the OS at bind time,
and the workers reuse that store, so no port is picked in advance and then lost to another
process (a race that a "find a free port, close it, pass it on" scheme has).

Each worker sees ``LOCAL_RANK`` and trains as one rank of a DDP job; the recipe does not change.
If a worker fails, torchrun stops the others and the launcher's exit status is non-zero. Ctrl-C or
SIGTERM: every rank stops after the same update, saves, and the launcher exits 130 or 143 in one line. For
several machines, call torchrun yourself (see ``docs/distributed.md``).
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from trickbag.errors import TrickbagError

__all__ = ["torchrun_command", "launch_torchrun", "launched_worker"]


def torchrun_command(
    recipe_name: str | None,
    overrides: Sequence[str],
    nproc: int,
    *,
    port: int = 0,
    quiet: bool = False,
    resume: str | os.PathLike | None = None,
    rdzv_id: str | None = None,
) -> list[str]:
    """The argument list that runs ``trickbag train`` in ``nproc`` processes on this machine (no shell).

    ``port=0`` (default) lets the OS pick a free port on 127.0.0.1 when torchrun's store binds it.

    >>> cmd = torchrun_command("digits", ["train.epochs=1"], 2, rdzv_id="r1")
    >>> cmd[1:3], cmd[cmd.index("--rdzv-endpoint") + 1], cmd[-4:]
    (['-m', 'torch.distributed.run'], '127.0.0.1:0', ['trickbag', 'train', 'digits', 'train.epochs=1'])
    """
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be an int >= 1, got {nproc!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise ValueError(f"port must be an int in [0, 65535] (0: any free port), got {port!r}")
    cmd = [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes", "1",
        "--nproc-per-node", str(nproc),
        "--rdzv-backend", "c10d",
        "--rdzv-endpoint", f"127.0.0.1:{port}",
        "--rdzv-id", rdzv_id or uuid.uuid4().hex,
        "--max-restarts", "0",
        "-m", "trickbag", "train",
    ]
    if quiet:
        cmd.append("--quiet")
    if resume is not None:
        cmd += ["--resume", str(resume)]
    if recipe_name is not None:
        cmd.append(str(recipe_name))
    cmd += [str(o) for o in overrides]
    return cmd


def launch_torchrun(
    recipe_name: str | None,
    overrides: Sequence[str],
    nproc: int,
    *,
    quiet: bool = False,
    resume: str | os.PathLike | None = None,
) -> int:
    """Run ``trickbag train`` in ``nproc`` processes with torchrun on 127.0.0.1 (a free port); return its exit status.

    The run name is fixed here (``run.name=...`` added when the recipe has none), so every worker
    writes to, and reports, the same directory, and an existing run directory is refused before
    any process starts. ``OMP_NUM_THREADS`` defaults to the CPU count divided by ``nproc``.
    The job runs in a session of its own; a SIGINT (Ctrl-C) or SIGTERM (pre-emption) of the launcher is
    passed once to every worker, which finishes its update, writes ``last.pt`` and ends; the launcher
    then returns 128 + the signal's number (130, 143). A second signal ends the job at once.
    """
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"dist.nproc must be an int >= 1, got {nproc!r}")
    overrides = [str(o) for o in overrides]
    if resume is None:
        from trickbag.recipe import load_recipe

        recipe = load_recipe(recipe_name, overrides)
        if recipe.run.name is None:
            # the format of trickbag.runs.naming.default_run_name, without importing torch in the launcher
            recipe.run.name = f"{recipe.name}-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"
            overrides.append(f"run.name={recipe.run.name}")
        run_dir = Path(recipe.run.dir) / recipe.run.name
        if run_dir.exists() and any(run_dir.iterdir()):
            raise TrickbagError(
                f"run directory {str(run_dir)!r} already exists; choose another run.name=..., "
                f"or continue it with: trickbag train --resume {run_dir}"
            )
    cmd = torchrun_command(recipe_name, overrides, nproc, quiet=quiet, resume=resume)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    env[LAUNCHED] = "1"  # an interrupted worker then ends with 0 and this launcher reports the interruption
    # a session of its own: a terminal's Ctrl-C reaches this launcher only, which passes ONE signal to the workers
    # (torchrun, signalled itself, would print a traceback and send the workers a second, stop-at-once signal)
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    relay = _SignalRelay(proc)
    try:
        with relay:
            status = proc.wait()
    finally:
        if proc.poll() is None:  # the launcher itself failed: leave no job behind
            _kill_job(proc)
    if relay.signum is not None:
        if status != 0:  # a rank was stopped before it could save (still starting, or a second signal)
            print("trickbag: interrupted", file=sys.stderr)
        return 128 + relay.signum
    if status not in (0, 130):
        print(f"trickbag: error: the {nproc}-process job failed (torchrun exit status {status}); "
              "the failing rank's error is printed above", file=sys.stderr)
    return status


#: set in the workers' environment by :func:`launch_torchrun`
LAUNCHED = "TRICKBAG_LAUNCHED"


def launched_worker() -> bool:
    """True in a worker that :func:`launch_torchrun` started (it reports an interruption for the job)."""
    return os.environ.get(LAUNCHED) == "1" and "LOCAL_RANK" in os.environ


class _SignalRelay:
    """While torchrun runs: the first SIGINT/SIGTERM goes to every worker once (each finishes its update,
    saves and ends with 0); a second one ends the whole job at once (SIGKILL; checkpoints are written
    atomically, so none is torn)."""

    #: SIGHUP (the terminal closed) stops the workers as SIGTERM does: the job must not outlive its launcher
    _SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalRelay:
        if threading.current_thread() is threading.main_thread():
            for sig in self._SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            _kill_job(self.proc)
            return
        self.signum = signum
        workers = _children(self.proc.pid)
        if not workers:  # torchrun has not started them yet: nothing to save
            _kill_job(self.proc)
        for pid in workers:
            try:
                os.kill(pid, signal.SIGTERM if signum == signal.SIGHUP else signum)
            except ProcessLookupError:
                pass


def _kill_job(proc: subprocess.Popen) -> None:
    """SIGKILL torchrun and its workers (their own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _children(pid: int) -> list[int]:
    """The process ids whose parent is ``pid`` (from ``/proc``; empty where there is none)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile, or not ours to read
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (name) ": state, ppid, ...
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found
