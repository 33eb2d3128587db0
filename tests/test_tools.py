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


# --------------------------------------------------------------------------- tools/golden_runs.py
def _golden():
    spec = importlib.util.spec_from_file_location("golden_runs", ROOT / "tools" / "golden_runs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["golden_runs"] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def _fake_run(folder: Path, weight, wall: str = "2.9 s") -> Path:
    import torch

    (folder / "checkpoints").mkdir(parents=True)
    ckpt = {"model": {"w": weight}, "counters": {"step": 8, "epoch": 2},
            "recipe": {"run": {"name": folder.name, "dir": str(folder.parent)}},
            "plugins": {"clock": {"wall_time_s": float(len(wall))}}}
    torch.save(ckpt, folder / "checkpoints" / "last.pt")
    (folder / "metrics.csv").write_text(f"epoch,step,train/loss,train/epoch_time_s\n0,4,0.5,{wall[:3]}\n")
    (folder / "summary.txt").write_text(f"run        {folder}\ntrain loss final 0.5\n"
                                        f"wall time  {wall} for 2 epochs, 8 updates\n")
    return folder


def test_golden_compare_finds_one_flipped_bit_and_skips_only_time_and_place(tmp_path):
    import torch

    golden = _golden()
    w = torch.linspace(-1, 1, 12).reshape(3, 4)
    flipped = w.clone()
    flipped.view(torch.int32)[1, 2] ^= 1  # the lowest bit of one float
    facts = {"exit_stop": 130, "exit_resume": 0, "resumed_from": {"position": "epoch 2, update 6"}, "argv": ["x"]}
    a = _fake_run(tmp_path / "a" / "run", w)
    same = _fake_run(tmp_path / "b" / "run", w.clone(), wall="7.4 s")  # other times and folder: still identical
    compared, diffs = golden.compare_run(a, same, facts, dict(facts))
    assert diffs == [], diffs
    assert any("last.pt (1 tensors)" in c for c in compared)
    bad = _fake_run(tmp_path / "c" / "run", flipped)
    _, diffs = golden.compare_run(a, bad, facts, {**facts, "exit_stop": 1})
    assert len(diffs) == 2 and diffs[0].startswith("last.pt model/w: max abs difference"), diffs
    assert diffs[1] == "exit_stop: 130 vs 1"
    (bad / "summary.txt").write_text((bad / "summary.txt").read_text().replace("0.5", "0.6"))
    _, diffs = golden.compare_run(a, bad, facts, facts)
    assert "summary.txt line 1: 'train loss final 0.5' vs 'train loss final 0.6'" in diffs


def test_golden_set_covers_every_builtin_recipe():
    from trickbag.config.loading import builtin_recipes

    golden = _golden()
    assert set(builtin_recipes()) <= {r.recipe for r in golden.RUNS}
    names = [r.name for r in golden.RUNS]
    assert len(names) == len(set(names))
    wanted = {"digits-ddp2", "digits-fsdp2", "digits-schedulefree", "digits-sam", "digits-swa", "digits-ema"}
    assert wanted <= set(names)
