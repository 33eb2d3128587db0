"""`trickbag train ... dist.nproc=2`: the torchrun command, an end-to-end 2-process run, a failing rank.

The subprocess tests start a new session and kill its whole process group on a hard timeout, so a
hang fails the test instead of leaving workers behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch.distributed as torch_dist

from trickbag import launch
from trickbag.errors import TrickbagError

needs_gloo = pytest.mark.skipif(not torch_dist.is_available() or not torch_dist.is_gloo_available(),
                                reason="torch built without distributed/gloo support")

TINY = ["train.epochs=1", "model.kwargs.width=4", "log.tensorboard=false", "run.plots=false", "run.progress=false"]
HARD_TIMEOUT_S = 240


def run_cli(args: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m trickbag ARGS`` (or a full command when ARGS starts with the interpreter), hard timeout."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(extra_env or {})}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = args if args[0] == sys.executable else [sys.executable, "-m", "trickbag", *args]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=HARD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher, torchrun and every worker
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} hung for {HARD_TIMEOUT_S} s\nstdout:\n{out}\nstderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def errors(stderr: str) -> str:
    """The lines of a failed job's stderr that say why (tracebacks' last lines, torchrun's summary)."""
    keep = [line for line in stderr.splitlines() if "rror" in line or "exitcode" in line or "Signal" in line]
    return "\n".join(keep[-40:]) or stderr[-3000:]


# --------------------------------------------------------------------------- the command
def test_torchrun_command_is_an_argument_list_for_this_interpreter() -> None:
    cmd = launch.torchrun_command("recipes/digits.yaml", ["dist.nproc=2", "run.name=a b"], 2, quiet=True, rdzv_id="j1")
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    flags = dict(zip(cmd[3:15:2], cmd[4:15:2]))
    # port 0 on 127.0.0.1: the OS picks a free port when torchrun's store binds it (nothing to race for)
    assert flags == {"--nnodes": "1", "--nproc-per-node": "2", "--rdzv-backend": "c10d",
                     "--rdzv-endpoint": "127.0.0.1:0", "--rdzv-id": "j1", "--max-restarts": "0"}
    # everything after the module name reaches `trickbag train` unchanged, one argument each (no shell)
    assert cmd[15:] == ["-m", "trickbag", "train", "--quiet", "recipes/digits.yaml", "dist.nproc=2", "run.name=a b"]
    assert launch.torchrun_command(None, [], 3, resume="runs/x")[-4:] == ["trickbag", "train", "--resume", "runs/x"]
    assert "127.0.0.1:29511" in launch.torchrun_command("digits", [], 2, port=29511)
    ids = {(c := launch.torchrun_command("digits", [], 2))[c.index("--rdzv-id") + 1] for _ in range(2)}
    assert len(ids) == 2  # a fresh rendezvous id per job
    for bad in ({"nproc": 0}, {"nproc": "2"}, {"port": -1}, {"port": 70000}):
        kw = {"nproc": 2, "port": 0, **bad}
        with pytest.raises(ValueError, match="nproc|port"):
            launch.torchrun_command("digits", [], kw["nproc"], port=kw["port"])


def test_launch_fixes_the_run_name_and_returns_the_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    seen = {}

    class FakePopen:
        def __init__(self, cmd: list[str], env: dict[str, str], start_new_session: bool = False) -> None:
            seen["cmd"], seen["env"] = cmd, env
            self.pid = 0

        def wait(self, timeout: float | None = None) -> int:
            return 3

        def poll(self) -> int:
            return 3

    monkeypatch.setattr(launch.subprocess, "Popen", FakePopen)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    status = launch.launch_torchrun("digits", [f"run.dir={tmp_path}"], 2)
    assert status == 3
    assert "the 2-process job failed (torchrun exit status 3)" in capsys.readouterr().err
    names = [a for a in seen["cmd"] if a.startswith("run.name=")]
    assert len(names) == 1 and names[0].startswith("run.name=digits-")  # every worker gets the same name
    assert seen["env"]["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))
    assert seen["cmd"][seen["cmd"].index("--rdzv-endpoint") + 1] == "127.0.0.1:0"
    from trickbag.recipe import load_recipe
    from trickbag.runs.naming import default_run_name

    assert len(names[0]) == len("run.name=" + default_run_name(load_recipe("digits")))  # the same format


def test_launch_refuses_an_existing_run_directory_before_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "recipe.yaml").write_text("x")
    monkeypatch.setattr(launch.subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    with pytest.raises(TrickbagError, match="already exists"):
        launch.launch_torchrun("digits", [f"run.dir={tmp_path}", "run.name=taken"], 2)


# --------------------------------------------------------------------------- end to end
@needs_gloo
def test_trickbag_train_with_dist_nproc_2_runs_end_to_end(tmp_path: Path) -> None:
    r = run_cli(["train", "recipes/digits.yaml", "dist.nproc=2", f"run.dir={tmp_path}", "run.name=e2e", *TINY],
                cwd=tmp_path)
    assert r.returncode == 0, errors(r.stderr)
    # rank 0 alone prints: one start line, one summary
    assert r.stdout.count("trickbag: training 'digits'") == 1, r.stdout
    assert "effective batch 64 = 32 per process x 1 accumulation step x 2 processes" in r.stdout
    assert "suggests optim.lr=0.1 " in r.stdout  # 0.05 x 64 / 32
    assert r.stdout.count("test acc") == 1
    run_dir = tmp_path / "e2e"
    for f in ("recipe.yaml", "metrics.csv", "summary.txt", "checkpoints/last.pt", "checkpoints/best.pt"):
        assert (run_dir / f).is_file(), f
    from trickbag.train.checkpoint_files import load_checkpoint

    ckpt = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert ckpt["recipe"]["dist"]["nproc"] == 2
    # 1293 training images, padded to 1294 = 2 x 647 per rank, batches of 32: 21 updates per epoch
    assert ckpt["counters"]["step"] == 21
    assert not any(k.startswith("module.") for k in ckpt["model"])  # the plain model's keys, not DDP's
    n_test = int(next(line for line in r.stdout.splitlines() if "test acc" in line).split(" on ")[1].split()[0])
    assert n_test == 360  # every test image counted once over the two ranks


@needs_gloo
def test_a_failing_rank_fails_the_whole_job_fast_with_its_error(tmp_path: Path) -> None:
    (tmp_path / "boom_model.py").write_text(textwrap.dedent("""
        import os
        import torch

        class Boom(torch.nn.Module):
            def __init__(self, num_classes):
                super().__init__()
                self.lin = torch.nn.Linear(16, num_classes)
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                if self.training and os.environ.get("RANK") == "1" and self.calls == 3:
                    raise RuntimeError("boom on rank 1 at forward 3")
                return self.lin(x.flatten(1))

        def make(num_classes):
            return Boom(num_classes)
    """))
    overrides = ["dist.nproc=2", "data.name=fake", "data.num_samples=96", "data.shape=[1,4,4]", "data.batch_size=4",
                 "model.name=boom_model:make", "dist.timeout_s=120", f"run.dir={tmp_path}", "run.name=boom",
                 *TINY[:1], *TINY[2:]]
    # the command `trickbag train ... dist.nproc=2` runs (the launcher itself is tested end to end above)
    r = run_cli(launch.torchrun_command("digits", overrides, 2), cwd=tmp_path, extra_env={"PYTHONPATH": str(tmp_path)})
    # rank 0 waits in the gradient all-reduce of update 3; torchrun sees rank 1 die and stops it
    assert r.returncode != 0
    assert "boom on rank 1 at forward 3" in r.stderr
    assert not (tmp_path / "boom" / "summary.txt").exists()
