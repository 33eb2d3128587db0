"""Library and app are separate installs: the core dependencies train a model with the Trainer, and a
command that needs the app's extras says in one line which one to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
APP_ONLY = {"scikit-learn", "scipy", "matplotlib", "tensorboard", "torchinfo", "mnist1d", "tqdm"}

#: makes the app's packages look uninstalled (importlib finds no spec for them), as in a core-only install
BLOCK = """
import sys, importlib.machinery
BLOCKED = {"sklearn", "scipy", "matplotlib", "tensorboard", "torchinfo", "mnist1d", "tqdm", "optuna", "pandas"}
class Filtered:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)
    @classmethod
    def invalidate_caches(cls):
        importlib.machinery.PathFinder.invalidate_caches()
sys.meta_path[:] = [Filtered if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})


def _name(requirement: str) -> str:
    return requirement.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower()


def test_the_core_dependencies_leave_the_app_packages_to_extras():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in meta["dependencies"]}
    assert not core & APP_ONLY, core & APP_ONLY
    assert {"torch", "torchvision", "numpy", "pyyaml", "pydantic", "torchmetrics"} <= core
    app = {_name(r) for r in meta["optional-dependencies"]["app"]}
    assert app >= APP_ONLY


def test_without_the_app_extras_the_library_trains_a_model_on_tensors(tmp_path):
    code = """
import torch, trickbag.losses, trickbag.data, trickbag.nn, trickbag.optim
from torch.utils.data import DataLoader, TensorDataset
from trickbag.train import Trainer
torch.manual_seed(0)
x = torch.randn(64, 4); y = (x[:, 0] > 0).long(); m = torch.nn.Linear(4, 2)
s = Trainer(m, torch.optim.SGD(m.parameters(), lr=0.5), DataLoader(TensorDataset(x, y), batch_size=16),
            DataLoader(TensorDataset(x, y), batch_size=64), max_epochs=3, device="cpu").fit()
leaked = sorted({k.split(".")[0] for k in sys.modules} & BLOCKED)
print(s.metrics["val/acc"] > 0.9, leaked)
"""
    r = _python(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["True", "[]"]


def test_a_command_that_needs_the_app_extra_says_which_in_one_line(tmp_path):
    code = """
import runpy
sys.argv = ["trickbag", "train", "run.dir=runs", "train.epochs=1"]
runpy.run_module("trickbag", run_name="__main__")
"""
    r = _python(code, tmp_path)
    assert r.returncode == 2, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'trickbag[app]'" in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists()
