"""``--debug`` (anywhere on the line, or TRICKBAG_DEBUG=1) adds the traceback above the one-line error."""

from __future__ import annotations

import pytest

from trickbag.cli import main

BAD = ["train", "digits", "model.name=resnet18", "run.progress=false"]  # fails in the pre-flight batch


@pytest.mark.parametrize("how", ["before", "after", "env"])
def test_debug_prints_the_traceback_and_keeps_the_line_and_status(tmp_path, capsys, monkeypatch, how):
    argv = [*BAD, f"run.dir={tmp_path}"]
    if how == "env":
        monkeypatch.setenv("TRICKBAG_DEBUG", "1")
    else:
        argv = ["--debug", *argv] if how == "before" else [*argv, "--debug"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "PreflightError" in err
    assert err.strip().splitlines()[-1].startswith("trickbag: error: model 'resnet18'")
    assert list(tmp_path.iterdir()) == []  # nothing written either way


def test_without_debug_the_error_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TRICKBAG_DEBUG", raising=False)
    assert main([*BAD, f"run.dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
