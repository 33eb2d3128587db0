"""Every script in ``benchmarks/`` still imports what it uses and parses its arguments: ``--help`` in a
fresh process (a rename in ``src/`` must not leave a benchmark that fails only when someone runs it).
The measurements themselves are not run here (no timed tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def test_the_benchmarks_are_found():
    assert {"overhead.py", "kernels.py", "time_to_accuracy.py", "trick_cost.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_a_benchmark_imports_and_answers_help(script):
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=300,
                          cwd=BENCHMARKS.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
