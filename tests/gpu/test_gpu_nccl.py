"""NCCL on one GPU: a world-size-1 process group made with ``env://`` on localhost, in a child process (a hung
NCCL start ends with the child, not the test session), running trickbag's DDP wrapping, the Trainer under DDP,
the gloo control group, SyncBatchNorm conversion and the shutdown."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
import torch.distributed as dist

from .helpers import CUDA_ONLY, PYTHON, subprocess_env

pytestmark = [*CUDA_ONLY, pytest.mark.skipif(not (dist.is_available() and dist.is_nccl_available()),
                                             reason="this torch build has no NCCL")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nccl_world_of_one_runs_trickbags_ddp_paths(tmp_path):
    env = subprocess_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", LOCAL_RANK="0",
                         WORLD_SIZE="1")
    proc = subprocess.run([PYTHON, str(Path(__file__).with_name("nccl_worker.py"))], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    r = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][len("RESULT "):])
    assert r["backend"] == "nccl" and r["dist_info"] == [0, 0, 1] and r["initialized"] and not r["is_distributed"]
    assert r["all_reduce"] == [0.0, 1.0, 2.0, 3.0] and r["gloo_all_reduce"] == [1.0, 1.0]
    assert r["ddp_max_abs_diff"] <= 1e-6, r  # DDP over one GPU trains what the plain model trains
    assert abs(r["ddp_val_loss"] - r["plain_val_loss"]) <= 1e-6, r
    assert r["sync_bn_type"] == "torch.nn.modules.batchnorm.SyncBatchNorm"  # torch's own on CUDA
    assert r["sync_bn_max_abs_diff"] <= 1e-6, r
    assert r["initialized_after_shutdown"] is False
