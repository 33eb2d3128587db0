"""Modules that moved answer at their former paths for one release: the same module, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from trickbag._moved import MOVED, new_name


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_former_path_gives_the_same_module_with_a_warning(old):
    code = ("import warnings, importlib, sys\nwarnings.simplefilter('error')\nimport trickbag\n"
            f"try:\n    importlib.import_module({old!r})\nexcept DeprecationWarning as w:\n    print('warned', w)\n"
            "warnings.simplefilter('ignore')\n"
            f"print(importlib.import_module({old!r}) is importlib.import_module({new_name(old)!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert f"warned {old} moved to {MOVED[old]}" in out and out.strip().endswith("True")


def test_submodules_of_a_moved_package_follow_it_and_old_names_import():
    assert new_name("trickbag.train.tricks.ema") == "trickbag.tricks.ema"
    assert new_name("trickbag.train.trainer") is None and new_name("trickbag.train.tricksy") is None
    with pytest.warns(DeprecationWarning, match="trickbag.train.tricks.mix moved to trickbag.tricks.mix"):
        sys.modules.pop("trickbag.train.tricks.mix", None)
        old = importlib.import_module("trickbag.train.tricks.mix")
    assert old.MixPlugin is importlib.import_module("trickbag.tricks.mix").MixPlugin


def test_every_target_exists():
    for new in MOVED.values():
        importlib.import_module(new)


def test_the_upgrading_page_lists_every_moved_module():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "upgrading.md").read_text()
    missing = [f"{old} -> {new}" for old, new in MOVED.items() if f"`{old}`" not in page or f"`{new}`" not in page]
    assert missing == []
