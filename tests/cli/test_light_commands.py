"""Light commands answer from the schema and the registries alone: ``python -m trickbag ...`` never
imports torch for them (checked in a fresh process with ``-X importtime``, which lists every import)."""

from __future__ import annotations

import subprocess
import sys

import pytest

LIGHT = [
    (["--version"], 0),
    (["--help"], 0),
    (["train", "--help"], 0),
    (["recipes"], 0),
    (["recipes", "--show", "digits"], 0),
    (["recipes", "--keys"], 0),
    (["recipes", "--keys", "--markdown"], 0),
    (["tricks"], 0),
    (["lint", "SCRIPT"], 0),
    (["lint", "--list"], 0),
    (["train", "digits", "train.epochs=abc"], 2),
    (["train", "digits", "train.threads=many"], 2),
    (["train", "digits", "optim.lrr=0.1"], 2),
]


def imported(stderr: str) -> set[str]:
    """Top-level packages named in ``-X importtime``'s report (``import time: self | cumulative | name``)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and not name.startswith("imported"):
                names.add(name.split(".")[0])
    return names


@pytest.mark.parametrize("args,code", LIGHT, ids=[" ".join(a) for a, _ in LIGHT])
def test_light_commands_do_not_import_torch(tmp_path, args, code):
    script = tmp_path / "train.py"
    script.write_text("import os\nprint(os.getcwd())\n")
    argv = [str(script) if a == "SCRIPT" else a for a in args]
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "trickbag", *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]
    names = imported(done.stderr)
    assert "trickbag" in names  # the report was read
    assert not names & {"torch", "torchvision", "torchmetrics", "numpy"}, sorted(names & {"torch", "numpy"})
    if code == 2:  # bad input: one line on stderr, nothing else
        errors = [ln for ln in done.stderr.splitlines() if not ln.startswith("import time:")]
        assert len(errors) == 1 and errors[0].startswith("trickbag: error: "), errors
    assert list(tmp_path.iterdir()) == [script]  # nothing written
