"""Every rank's state in a DDP checkpoint, and DDP validation of the weights and statistics that are saved.

* ``verify-resume`` (SIGKILL of every rank at chosen moments, then ``--resume``) is IDENTICAL for a recipe with
  dropout and mixing, under DDP and FSDP on 2 and 4 processes: each rank's RNG, the tricks' generators and the
  loader's position are in the checkpoint (before, a DDP checkpoint held rank 0's only, and the other ranks forked
  new streams on resume; and a resume at an epoch's last update lost that the epoch had no training accuracy);
* the logged validation loss of a 2-process run with BatchNorm equals a single-process evaluation of the saved
  checkpoint (``evaluate_run``) to 1e-6, on a validation set whose size does not divide by 2 (before, each rank
  evaluated with its own BatchNorm statistics while the checkpoint holds rank 0's).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as torch_dist

from trickbag.runs.inference import evaluate_run
from trickbag.train.checkpoint_files import load_checkpoint

pytestmark = pytest.mark.skipif(not torch_dist.is_available() or not torch_dist.is_gloo_available(),
                                reason="torch built without distributed/gloo support")

DEADLINE_S = 300
#: small_cnn (BatchNorm, dropout) on digits, few updates; quiet
BASE = ["model.kwargs={dropout: 0.3}", "data.batch_size=64", "train.seed=2", "log.tensorboard=false",
        "run.plots=false", "run.progress=false", "dist.timeout_s=60", "train.threads=1"]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}


def _verify(tmp_path: Path, *overrides: str) -> str:
    cmd = [sys.executable, "-m", "trickbag", "verify-resume", "digits", *BASE, *overrides, "--kills", "2",
           "--seed", "5", "--out", str(tmp_path / "v")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=3 * DEADLINE_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize(("strategy", "nproc"), [("ddp", 2), ("fsdp", 2), ("ddp", 4), ("fsdp", 4)])
def test_verify_resume_is_identical_with_dropout_and_mixing(tmp_path: Path, strategy: str, nproc: int) -> None:
    out = _verify(tmp_path, f"dist.nproc={nproc}", f"dist.strategy={strategy}", "train.epochs=2",
                  "train.checkpoint_every_steps=3", "tricks.mix.enabled=true", "tricks.mix.mixup_alpha=0.4")
    assert out.strip().splitlines()[-1].startswith("verdict: IDENTICAL"), out[-3000:]
    last = load_checkpoint(tmp_path / "v" / "runs" / "reference" / "checkpoints" / "last.pt")
    ranks = last["ranks"]
    assert len(ranks) == nproc and set(ranks[1]["generators"]) == {"mix"}
    assert ranks[0]["rng"]["torch"].ne(ranks[1]["rng"]["torch"]).any()  # the ranks' streams differ: both kept


def test_logged_ddp_validation_is_the_evaluation_of_the_saved_checkpoint(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "trickbag", "train", "digits", *BASE, "dist.nproc=2", "train.epochs=1",
           "data.val_fraction=0.103", f"run.dir={tmp_path}", "run.name=r"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=DEADLINE_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "r"
    logged = load_checkpoint(run / "checkpoints" / "last.pt")["history"][-1]
    assert logged["val/n"] % 2 == 1  # the two ranks hold shards of different sizes
    again = evaluate_run(run / "checkpoints" / "last.pt", split="val", device="cpu")
    assert again["n"] == logged["val/n"]
    assert abs(again["loss"] - logged["val/loss"]) <= 1e-6, (again["loss"], logged["val/loss"])
    assert abs(again["acc"] - logged["val/acc"]) <= 1e-6
