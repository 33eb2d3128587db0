"""FSDP2 (``dist.strategy=fsdp``) on the CPU with gloo, through the command line as users run it.

* the same recipe (EMA, SAM, no-decay groups, clipping, accumulation) under ``fsdp`` and ``ddp`` on 2 processes ends
  with the same weights, EMA average and optimizer state to float32 reduction-order tolerance (``ATOL``: FSDP
  reduce-scatters the gradients where DDP all-reduces them; on the same data the sums differ in the last bits). The
  model is smooth (``smooth_cnn.py``) so those last bits stay last bits over the run;
* ``fsdp`` on one process (a group of one) against the plain single-process run;
* ``fsdp`` on 2 processes against one process with the global batch (a model without batch statistics);
* a sharded checkpoint written by 2 processes loads into 1, 2 and 4 processes exactly (``fsdp_worker.py``), and a
  run resumes with another number of processes at an epoch's end;
* ``verify-resume`` (SIGKILL of every rank, then ``--resume``) is IDENTICAL for an fsdp recipe with EMA.

The runs are shared by the tests (module fixtures); each job has a deadline, so a hang fails instead of stalling.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as torch_dist

from trickbag.train.checkpoint_files import load_checkpoint

pytestmark = pytest.mark.skipif(not torch_dist.is_available() or not torch_dist.is_gloo_available(),
                                reason="torch built without distributed/gloo support")

ATOL = 2e-5
#: small_cnn on fake 8x8 images: 4 blocks (FSDP units) and the root; EMA, clipping, accumulation, momentum
BASE = ["data.name=fake", "data.num_samples=160", "data.shape=[1,8,8]", "data.augment=false", "data.batch_size=8",
        "model.name=small_cnn", "train.epochs=2", "train.seed=1", "optim.lr=0.05", "schedule.warmup_epochs=0",
        "train.accumulate=2", "train.clip=1.0", "tricks.ema.enabled=true", "tricks.ema.decay=0.9",
        "train.checkpoint_every_steps=2", "log.tensorboard=false", "run.plots=false", "run.progress=false",
        "dist.timeout_s=60", "train.threads=1"]
DEADLINE_S = 300


def _env() -> dict[str, str]:
    here = Path(__file__).resolve().parent  # smooth_cnn.py, the model of the fsdp/ddp comparison
    path = os.pathsep.join([str(here.parents[1] / "src"), str(here)])
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


def train(where: Path, name: str, *overrides: str, resume: Path | None = None) -> Path:
    """``trickbag train digits BASE overrides`` (or ``--resume``) in a subprocess; the run folder."""
    cmd = [sys.executable, "-m", "trickbag", "train"]
    cmd += ["--resume", str(resume), *overrides] if resume else ["digits", *BASE, f"run.dir={where}",
                                                                 f"run.name={name}", *overrides]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=DEADLINE_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return resume or where / name


def last(run: Path) -> dict[str, Any]:
    return load_checkpoint(run / "checkpoints" / "last.pt")  # the shards read in whole, as eval/predict do


def assert_close(a: Any, b: Any, atol: float, where: str = "") -> None:
    """Every tensor of two nested checkpoint parts within ``atol``; everything else equal."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.shape == b.shape, where
        torch.testing.assert_close(a.double(), b.double(), atol=atol, rtol=0, msg=lambda m: f"{where}: {m}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), f"{where}: {sorted(a)} vs {sorted(b)}"
        for k in a:
            assert_close(a[k], b[k], atol, f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, atol, f"{where}/{i}")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("fsdp")
    # SAM (its perturbation on the shards, with the global gradient norm) and no-decay groups (resolved by name);
    # small_cnn's layout with GELU and average pooling (smooth_cnn.py): with ReLU and max pooling a rounding
    # difference can flip a branch, and two correct runs part by 1e-3 (seen on one CPU after eight updates)
    both = ["tricks.sam.enabled=true", "tricks.param_groups.enabled=true", "model.name=smooth_cnn:smooth_cnn"]
    return {
        "fsdp": train(where, "fsdp", "dist.nproc=2", "dist.strategy=fsdp", *both),
        "ddp": train(where, "ddp", "dist.nproc=2", *both),
    }


# --------------------------------------------------------------------------- the same result
def test_fsdp_and_ddp_on_two_processes_end_with_the_same_state(runs: dict[str, Path]) -> None:
    f, d = last(runs["fsdp"]), last(runs["ddp"])
    assert "shards" not in d and (runs["fsdp"] / "checkpoints").glob("last.pt.shards-*")
    assert f["counters"]["step"] == d["counters"]["step"] == 8  # 2 x 115 train / (8 x 2 ranks x 2 accumulated)
    assert_close(f["model"], d["model"], ATOL, "model")
    assert_close(f["eval_model"], d["eval_model"], ATOL, "eval_model")  # the sharded EMA shadow, gathered
    assert_close(f["plugins"]["ema"]["module"], d["plugins"]["ema"]["module"], ATOL, "ema")
    assert_close(f["optimizer"]["state"], d["optimizer"]["state"], ATOL, "optimizer")
    for hf, hd in zip(f["history"], d["history"]):
        assert hf["train/loss"] == pytest.approx(hd["train/loss"], abs=1e-5)
        # FSDP evaluates rank 0's BatchNorm statistics on every rank (those checkpoints hold), DDP each rank its
        # own (rank 0's from the last forward, updated by its batch): the validation metrics differ a little
        assert hf["val/loss"] == pytest.approx(hd["val/loss"], abs=1e-2)
    best_f = load_checkpoint(runs["fsdp"] / "checkpoints" / "best.pt")
    assert "shards" not in best_f and not any(type(v).__name__ == "DTensor" for v in best_f["model"].values())


def test_fsdp_on_one_process_matches_the_plain_run(tmp_path: Path) -> None:
    one = last(train(tmp_path, "fsdp1", "dist.strategy=fsdp", "train.epochs=1"))
    plain = last(train(tmp_path, "plain", "train.epochs=1"))
    assert_close(one["model"], plain["model"], 1e-6, "model")
    assert_close(one["optimizer"]["state"], plain["optimizer"]["state"], 1e-6, "optimizer")


def test_fsdp_on_two_processes_matches_one_process_with_the_global_batch(tmp_path: Path) -> None:
    # a linear model (no batch statistics), no accumulation, 64 training samples: update j sees the same 16 in both
    common = ["model.name=mlp", "model.kwargs={hidden: []}", "train.accumulate=1", "tricks.ema.enabled=false",
              "data.num_samples=96", "data.val_fraction=0.15"]
    two = last(train(tmp_path, "two", *common, "dist.nproc=2", "dist.strategy=fsdp"))
    one = last(train(tmp_path, "one", *common, "data.batch_size=16"))
    assert_close(two["model"], one["model"], ATOL, "model")


# --------------------------------------------------------------------------- resuming on other process counts
@pytest.mark.parametrize("nproc", [1, 2, 4])
def test_a_sharded_checkpoint_loads_exactly_into_any_number_of_processes(runs: dict[str, Path], tmp_path: Path,
                                                                         nproc: int) -> None:
    out = tmp_path / "held.pt"
    worker = Path(__file__).with_name("fsdp_worker.py")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                           str(worker), str(runs["fsdp"]), str(out)],
                          capture_output=True, text=True, env=_env(), timeout=DEADLINE_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    held = torch.load(out, weights_only=True)
    saved = last(runs["fsdp"])
    assert held["world"] == nproc and held["step"] == saved["counters"]["step"]
    total = sum(v.numel() for k, v in saved["model"].items() if v.is_floating_point() and "running" not in k)
    assert held["local_numel"] <= -(-total // nproc) + 64 * nproc  # rank 0 holds about 1/N of the weights
    assert_close(held["model"], saved["model"], 0.0, "model")
    assert_close(held["optimizer"]["state"], saved["optimizer"]["state"], 0.0, "optimizer")
    assert_close(held["ema"]["module"], saved["plugins"]["ema"]["module"], 0.0, "ema")


def test_a_run_resumes_on_another_number_of_processes_at_an_epoch_end(runs: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(runs["fsdp"], copy)
    for p in (copy / "checkpoints").glob("step-*"):  # keep the epoch-end checkpoint only
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    train(tmp_path, "", "train.epochs=3", "dist.nproc=1", resume=copy)
    log = (copy / "resumes.log").read_text()
    assert "2 -> 1 processes" in log
    after = last(copy)
    assert after["counters"]["epoch"] == 3 and after["counters"]["world_size"] == 1
    assert after["counters"]["step"] == 8 + 8  # 115 samples / (8 x 2 accumulated) on one process: 8 updates


# --------------------------------------------------------------------------- kill -9 and resume
def test_verify_resume_is_identical_for_an_fsdp_recipe_with_ema(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "trickbag", "verify-resume", "digits", *BASE, "dist.nproc=2", "dist.strategy=fsdp",
           "train.epochs=3", "train.deterministic=true", "--kills", "2", "--seed", "3", "--out", str(tmp_path / "v")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=3 * DEADLINE_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("verdict: IDENTICAL"), done.stdout[-3000:]
    assert "train --resume" in (tmp_path / "v" / "logs" / "killed-2.log").read_text()
