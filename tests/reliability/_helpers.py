"""Helpers of the reliability tests: a tiny recipe, CLI runners, checkpoint comparison.

The recipe trains a small MLP (with dropout) on generated data for 3 epochs of 9 updates, with
mixup, EMA and a warmup + cosine schedule, deterministic, a step checkpoint every 4 updates
(newest 2 kept): a few seconds in-process, and every piece of state a resume must restore.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

TINY_RECIPE = """\
name: tiny
data: {name: fake, num_samples: 200, batch_size: 16, val_fraction: 0.1, test_fraction: 0.2}
model: {name: mlp, kwargs: {hidden: [32], dropout: 0.1}}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
schedule: {name: cosine, warmup_epochs: 0.5}
train: {epochs: 3, deterministic: true, checkpoint_every_steps: 4, keep_checkpoints: 2, seed: 3}
run: {progress: false, plots: false}
log: {tensorboard: false}
tricks: {mix: {enabled: true, mixup_alpha: 0.4, cutmix_alpha: 1.0}, ema: {enabled: true, decay: 0.9}}
"""
#: 144 training samples / batch 16 = 9 updates per epoch, 27 in all
UPDATES_PER_EPOCH = 9

#: metrics that measure time, the only values allowed to differ between identical runs
TIME_KEYS = ("train/samples_per_s", "train/epoch_time_s", "wall_time_s")


def write_recipe(folder: Path, text: str = TINY_RECIPE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tiny.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run_inprocess(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    """``trickbag ARGV`` in this process: (exit status, stdout, stderr)."""
    from trickbag.cli import main

    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def run_subprocess(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
                   timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m trickbag ARGV`` in a fresh process (one intra-op thread, like this test process)."""
    full_env = dict(os.environ)
    full_env.pop("TRICKBAG_TEST_KILL_AT", None)
    tests = str(Path(__file__).resolve().parents[1])  # the kill-switch plug-in is reliability.killswitch
    path = os.pathsep.join(filter(None, [tests, full_env.get("PYTHONPATH")]))
    full_env.update({"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": path})
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "trickbag", *argv], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def load(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True)


def differences(a: Any, b: Any, path: str = "", ignore: tuple[str, ...] = TIME_KEYS) -> list[str]:
    """Every place where two checkpoint trees differ: tensors by ``torch.equal``, the rest by ``==``."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        ok = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
        return [] if ok else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}: keys {sorted(map(str, set(a) ^ set(b)))}"] if set(a) != set(b) else []
        for k in a:
            if k in b and k not in ignore:
                out += differences(a[k], b[k], f"{path}/{k}", ignore)
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} vs {len(b)}"]
        out = []
        for i, (u, v) in enumerate(zip(a, b)):
            out += differences(u, v, f"{path}[{i}]", ignore)
        return out
    same = a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)
    return [] if same else [f"{path}: {a!r} vs {b!r}"]


def training_state_differences(ref: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Differences in everything a checkpoint holds except the run's name and timings."""
    ref, other = dict(ref), dict(other)
    ref.pop("recipe", None)
    other.pop("recipe", None)
    return differences(ref, other)


def csv_without_times(path: Path) -> list[list[str]]:
    import csv

    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    drop = {i for i, name in enumerate(rows[0]) if name in TIME_KEYS}
    return [[c for i, c in enumerate(r) if i not in drop] for r in rows]
