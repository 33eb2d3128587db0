"""``dist.strategy=fsdp`` on one CUDA GPU: FSDP2 in a process group of one over NCCL, the sharded checkpoint (DCP)
written from GPU tensors and read back on the GPU (a resume) and in a process that sees no GPU (``trickbag eval``),
and bf16 gathers (``dist.param_dtype=bfloat16``) under bf16 autocast."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .helpers import CUDA_ONLY, PYTHON, subprocess_env

pytestmark = CUDA_ONLY

COMMON = ["train.device=cuda", "dist.strategy=fsdp", "run.progress=false", "log.tensorboard=false", "run.plots=false",
          "train.checkpoint_every_steps=20", "tricks.ema.enabled=true"]


def _trickbag(cwd: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "trickbag", *args], cwd=cwd, env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=timeout)


def _said(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def test_fsdp_on_one_gpu_trains_writes_shards_resumes_and_evaluates_on_the_cpu(tmp_path):
    p = _trickbag(tmp_path, "train", "digits", *COMMON, "train.epochs=2", f"run.dir={tmp_path}", "run.name=f")
    assert p.returncode == 0, _said(p)
    assert "fsdp: 4 blocks and the root sharded over 1 process" in p.stdout, p.stdout
    run = tmp_path / "f"
    assert list((run / "checkpoints").glob("last.pt.shards-*")), sorted((run / "checkpoints").iterdir())
    r = _trickbag(tmp_path, "train", "--resume", str(run), "train.epochs=3")
    assert r.returncode == 0, _said(r)
    assert re.search(r"^val acc .*\(epoch 3\)", r.stdout, re.M) and "from last.pt at epoch 3" in r.stdout, r.stdout
    e = _trickbag(tmp_path, "eval", str(run), "--device", "cpu", CUDA_VISIBLE_DEVICES="")
    assert e.returncode == 0, _said(e)
    assert re.search(r"^test acc ([0-9.]+)", e.stdout, re.M), e.stdout


def test_fsdp_bf16_gathers_with_bf16_autocast_train_on_the_gpu(tmp_path):
    p = _trickbag(tmp_path, "train", "digits", *COMMON, "train.epochs=2", "dist.param_dtype=bfloat16",
                  "train.precision=bf16", f"run.dir={tmp_path}", "run.name=b")
    assert p.returncode == 0, _said(p)
    m = re.search(r"^test acc\s+([0-9.]+)", (tmp_path / "b" / "summary.txt").read_text(), re.M)
    assert m and float(m.group(1)) > 0.5, (tmp_path / "b" / "summary.txt").read_text()
