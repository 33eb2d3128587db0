"""Session-wide test settings and shared fixtures.

One intra-op thread per test process: the suite runs on 2 shared cores (often as ``pytest -n 2``);
one thread per process avoids oversubscription and makes CPU results independent of the thread count.
``OMP_NUM_THREADS=1`` (unless set) holds it for recipes too: ``train.threads: auto`` follows the variable,
and child processes inherit it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

#: the recipe of the shared tiny run: synthetic data, two short epochs, no bar
TINY = ["data.name=fake", "data.num_samples=120", "data.batch_size=16", "train.epochs=2", "run.progress=false",
        "log.every_steps=2"]


@pytest.fixture
def tiny_recipe(tmp_path: Path) -> Callable[..., Any]:
    """``tiny_recipe(*overrides, name="a")``: the tiny recipe writing its run under ``tmp_path``."""
    from trickbag.recipe import load_recipe

    def make(*extra: str, name: str = "a", base: str = "digits") -> Any:
        return load_recipe(base, [*TINY, f"run.dir={tmp_path}", f"run.name={name}", *extra])

    return make


class _OsWithFault:
    """``os`` as trickbag._files sees it, with a fault called on the temporary file before the rename."""

    def __init__(self, fault: Callable[[Path], None]) -> None:
        self._fault = fault

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def replace(self, src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        self._fault(Path(src))
        os.replace(src, dst, *args, **kwargs)


@pytest.fixture
def fault_before_rename(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[Path], None] | None], None]:
    """``fault_before_rename(fn)``: every atomic write calls ``fn(temporary_path)`` after the data is in the
    temporary file and before it is renamed over the target (raise OSError for a full disk, kill the
    process for a crash); ``fault_before_rename(None)`` removes it."""
    from trickbag import _files

    def install(fault: Callable[[Path], None] | None) -> None:
        monkeypatch.setattr(_files, "os", _OsWithFault(fault) if fault is not None else os)

    return install
