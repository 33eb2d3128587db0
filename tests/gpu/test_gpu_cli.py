"""The command line end to end on CUDA, each command in a fresh process as a user runs it: ``trickbag train`` of
the built-in digits recipe on ``train.device=cuda``, ``trickbag eval`` of that run in a process that sees no GPU
and in one that does, and ``trickbag verify-resume`` (SIGKILL + resume) on the GPU."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .helpers import CUDA_ONLY, PYTHON, subprocess_env

pytestmark = CUDA_ONLY


def _trickbag(cwd: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "trickbag", *args], cwd=cwd, env=subprocess_env(**env),
                          capture_output=True, text=True, timeout=timeout)


def _said(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def _test_line(text: str) -> tuple[float, float, int]:
    """(acc, loss, samples) from ``trickbag eval``'s first line ``test acc A  loss L  (N samples)``."""
    m = re.search(r"^test acc ([0-9.]+)\s+loss ([0-9.]+)\s+\((\d+) samples\)", text, re.M)
    assert m, text
    return float(m.group(1)), float(m.group(2)), int(m.group(3))


def test_train_digits_on_cuda_then_eval_the_run_on_a_cpu_only_process_and_on_the_gpu(tmp_path):
    p = _trickbag(tmp_path, "train", "digits", "train.device=cuda", "train.epochs=2", f"run.dir={tmp_path}",
                  "run.name=g", "run.progress=false")
    assert p.returncode == 0, _said(p)
    assert re.search(r"\bon cuda", p.stdout), p.stdout
    run = tmp_path / "g"
    assert (run / "checkpoints" / "best.pt").is_file() and (run / "checkpoints" / "last.pt").is_file()
    m = re.search(r"^test acc\s+([0-9.]+) on (\d+) samples \(best\.pt\), loss ([0-9.]+)",
                  (run / "summary.txt").read_text(), re.M)
    assert m, (run / "summary.txt").read_text()
    acc, n, loss = float(m.group(1)), int(m.group(2)), float(m.group(3))
    assert acc > 0.5  # two epochs on digits learn something

    on_cpu = _trickbag(tmp_path, "eval", str(run), "--device", "cpu", CUDA_VISIBLE_DEVICES="")
    assert on_cpu.returncode == 0, _said(on_cpu)
    on_gpu = _trickbag(tmp_path, "eval", str(run), "--device", "cuda")
    assert on_gpu.returncode == 0, _said(on_gpu)
    for proc in (on_cpu, on_gpu):
        e_acc, e_loss, e_n = _test_line(proc.stdout)
        assert e_n == n and abs(e_acc - acc) <= 1.0 / n + 1e-9 and abs(e_loss - loss) <= 2e-3, (proc.stdout, acc, loss)


@pytest.mark.timeout(180)
def test_verify_resume_on_cuda_with_deterministic_true_is_identical(tmp_path):
    out = tmp_path / "v"
    # ~160 updates per epoch (batch 8), so the kill lands while the run trains
    p = _trickbag(tmp_path, "verify-resume", "digits", "train.device=cuda", "train.deterministic=true",
                  "train.epochs=3", "data.batch_size=8", "train.checkpoint_every_steps=25", "--kills", "1",
                  "--out", str(out), timeout=170)
    cert = (out / "certificate.md").read_text() if (out / "certificate.md").is_file() else "(no certificate)"
    assert p.returncode == 0, _said(p) + "\n" + cert
    assert "verdict: IDENTICAL: killed" in cert, cert
