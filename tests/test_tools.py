"""tools/fnlen.py: the function-length check counts code lines only (a count written out by hand is the reference)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fnlen():
    spec = importlib.util.spec_from_file_location("fnlen", ROOT / "tools" / "fnlen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = '''
def f(a):
    """A docstring

    over three lines."""
    # a comment

    b = a + 1  # code
    text = """a string that is code,
    not a docstring"""
    return (b,
            text)


async def g():
    return 1
'''


def test_counts_code_lines_only(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    fnlen = _fnlen()
    # by hand: def line, b = ..., the two lines of text = ..., the two lines of the return -> 6; g: 2
    assert fnlen.long_functions(path, 0) == [(6, f"{path}:2 f"), (2, f"{path}:15 g")]
    assert fnlen.long_functions(path, 6) == []
    assert fnlen.long_functions(path, 5) == [(6, f"{path}:2 f")]


def test_exit_status(tmp_path):
    (tmp_path / "m.py").write_text(SOURCE)
    over = subprocess.run([sys.executable, str(ROOT / "tools" / "fnlen.py"), str(tmp_path), "5"], capture_output=True,
                          text=True)
    assert over.returncode == 1 and "functions over 5 code lines: 1" in over.stdout
    ok = subprocess.run([sys.executable, str(ROOT / "tools" / "fnlen.py"), str(tmp_path), "6"], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and "functions over 6 code lines: 0" in ok.stdout
