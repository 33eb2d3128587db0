"""A Lightning run SIGKILLed right after one of Lightning's own checkpoints (``ModelCheckpoint`` at an epoch end, or
``every_n_train_steps`` inside an epoch, at its last batch, under accumulation), resumed with ``fit(ckpt_path=...)``,
ends at the straight run's weights bit for bit, with everything drawing randomness: dropout (the global RNG), a
shuffling loader with its own generator, a random transform in the dataset (in the main process or in 2 workers), mix
(its own generator) and EMA's shadow; also under DDP. The TricksCallback's state in the checkpoint carries the RNG,
the generators and the loader's position (under DDP every process's); Lightning alone makes its iterator for the
resumed epoch before any state is loaded (so the order, the workers' seeds and the RNG after it differ) and starts a
resumed epoch's data from its first batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as torch_dist

pytest.importorskip("lightning")

WORKER = Path(__file__).with_name("lightning_kill_worker.py")
DRAWING = {"TB_DROP": "0.2", "TB_SHUFFLE": "5", "TB_NOISE": "1"}


def run_worker(*args: object, env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path), **env_extra}
    return subprocess.run([sys.executable, str(WORKER), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: Any) -> Any:
    """The uninterrupted run's final weights, one per (workers, accumulation)."""
    done: dict[tuple[Any, ...], torch.Tensor] = {}

    def get(workers: int, accumulate: str, ddp: str = "", **extra: str) -> torch.Tensor:
        key = (workers, accumulate, ddp, *sorted(extra.items()))
        if key not in done:
            where = tmp_path_factory.mktemp("straight")
            r = run_worker("straight", where, where / "final.pt", workers, "epoch",
                           env_extra={**DRAWING, "TB_ACCUMULATE": accumulate, "TB_DDP": ddp, **extra})
            assert r.returncode == 0, r.stderr[-3000:]
            done[key] = torch.load(where / "final.pt")
        return done[key]
    return get


def kill_and_resume(tmp_path: Path, workers: int, kill: str, **extra: str) -> torch.Tensor:
    env = {**DRAWING, **extra}
    killed = run_worker("killed", tmp_path / "ckpt", tmp_path / "unused.pt", workers, kill, env_extra=env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert (tmp_path / "ckpt" / "last.ckpt").is_file()
    resumed = run_worker("resume", tmp_path / "ckpt", tmp_path / "resumed.pt", workers, kill, env_extra=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return torch.load(tmp_path / "resumed.pt")


# 5 batches an epoch, 3 epochs: step3 is inside the first epoch (whose iterator Lightning made before any hook),
# step7 inside the second, step5 after the first epoch's last batch but before its end
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kill", ["epoch", "step3", "step7", "step5"])
def test_sigkill_after_lightnings_checkpoint_then_resume_equals_the_straight_run(tmp_path: Path, workers: int,
                                                                                  kill: str, straight: Any) -> None:
    assert torch.equal(kill_and_resume(tmp_path, workers, kill), straight(workers, "1"))


@pytest.mark.parametrize("kill", ["epoch", "step7"])
def test_with_validation_and_swa_sigkill_then_resume_equals_the_straight_run(tmp_path: Path, kill: str,
                                                                             straight: Any) -> None:
    """With a validation loader Lightning writes the epoch's checkpoint at validation's end, after the last batch
    but before the epoch's end, which a resumed run does not run again (the callback ends the epoch for the
    tricks); SWA instead of EMA."""
    extra = {"TB_VAL": "1", "TB_SWA": "1"}
    assert torch.equal(kill_and_resume(tmp_path, 0, kill, **extra), straight(0, "1", "", **extra))


def test_sigkill_inside_an_epoch_under_accumulation_then_resume_equals_the_straight_run(tmp_path: Path,
                                                                                        straight: Any) -> None:
    # accumulate 2 over 5 batches: updates of 2, 2, 1 batches; update 4 ends at the second epoch's second batch
    assert torch.equal(kill_and_resume(tmp_path, 0, "step4", TB_ACCUMULATE="2"), straight(0, "2"))


def test_without_trickbags_state_the_resume_differs(tmp_path: Path, straight: Any) -> None:
    """The negative control: the same resume with the callback's checkpoint state ignored is not the straight
    run (what Lightning alone gives)."""
    resumed = kill_and_resume(tmp_path, 0, "step7", TRICKBAG_TEST_IGNORE_STATE="1")
    assert not torch.equal(resumed, straight(0, "1"))


@pytest.mark.skipif(not torch_dist.is_available() or not torch_dist.is_gloo_available(),
                    reason="torch built without distributed/gloo support")
@pytest.mark.parametrize("kill", ["epoch", "step2", "step4"])
def test_ddp_two_processes_sigkill_then_resume_equals_the_straight_run(tmp_path: Path, kill: str,
                                                                       straight: Any) -> None:
    """strategy="ddp", 2 gloo CPU processes, each with its own RNG stream (dropout, the dataset's noise) and mix
    generator: the checkpoint holds every rank's, each resumes its own. 3 batches a rank and epoch: step2 is inside
    the first epoch, step4 inside the second."""
    assert torch.equal(kill_and_resume(tmp_path, 0, kill, TB_DDP="1"), straight(0, "1", "1"))
