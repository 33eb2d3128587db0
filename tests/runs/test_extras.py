"""A run that needs an optional package the install lacks says which extra to install, in one line, before
anything is written (a rerun on the same name then works)."""

from __future__ import annotations

import sys

import pytest

from trickbag.cli import main

QUIET = ["run.progress=false", "train.epochs=1", "model.name=mlp"]


@pytest.mark.parametrize("key, module, extra", [("log.wandb=true", "wandb", "wandb"),
                                                ("log.tensorboard=true", "tensorboard", "app"),
                                                ("run.plots=true", "matplotlib", "app")])
def test_missing_optional_package_is_one_line_exit_2_and_no_folder(tmp_path, capsys, monkeypatch, key, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` raises ImportError, as when not installed
    code = main(["train", "digits", *QUIET, key, f"run.dir={tmp_path}", "run.name=x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"needs {module!r}, which is not installed: pip install 'trickbag[{extra}]'" in err[0]
    assert key.split("=")[0] in err[0]  # and the key that turns it off
    assert list(tmp_path.iterdir()) == []


def test_every_public_name_resolves_and_star_import_works():
    import importlib

    import trickbag

    for name, module in trickbag._EXPORTS.items():
        assert getattr(trickbag, name) is getattr(importlib.import_module(module), name), name
    namespace: dict = {}
    exec("from trickbag import *", namespace)
    assert {"Trainer", "Recipe", "load_recipe", "EMA"} <= set(namespace)
