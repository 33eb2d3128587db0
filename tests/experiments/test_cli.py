"""The experiment commands on the command line: listed in --help, and importing the CLI stays light."""

from __future__ import annotations

import subprocess
import sys


def test_cli_import_stays_light():
    code = ("import sys, trickbag.cli; p = trickbag.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'optuna', 'scipy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    helps = subprocess.run([sys.executable, "-m", "trickbag", "--help"], capture_output=True, text=True).stdout
    for cmd in ("ablate", "sweep", "lr-find", "report"):
        assert cmd in helps
