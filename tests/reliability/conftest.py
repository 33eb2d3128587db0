"""Fixtures of the reliability tests (helpers live in ``_helpers.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from ._helpers import write_recipe


@pytest.fixture(autouse=True)
def _restore_global_torch_state(monkeypatch):
    """Runs set determinism flags process-wide; put them back, and never inherit the crash seam."""
    monkeypatch.delenv("TRICKBAG_TEST_KILL_AT", raising=False)
    det = torch.are_deterministic_algorithms_enabled()
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(det)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory) -> Path:
    """The tiny recipe trained start to finish without interruption (in-process); its run directory."""
    from trickbag.cli import main

    root = tmp_path_factory.mktemp("reference")
    recipe = write_recipe(root)
    det = torch.are_deterministic_algorithms_enabled()
    saved = os.environ.pop("TRICKBAG_TEST_KILL_AT", None)
    try:
        rc = main(["train", str(recipe), f"run.dir={root / 'runs'}", "run.name=ref", "--quiet"])
    finally:
        torch.use_deterministic_algorithms(det)
        if saved is not None:
            os.environ["TRICKBAG_TEST_KILL_AT"] = saved
    assert rc == 0
    return root / "runs" / "ref"
