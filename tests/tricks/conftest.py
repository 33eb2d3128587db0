"""Fixtures of the trick tests."""

from __future__ import annotations

import pytest

from .helpers import write_teacher_module


@pytest.fixture
def teacher_module(tmp_path, monkeypatch):
    """An importable module with teacher functions (``teacher``, ``wrong_classes``, ``not_a_module``); its name."""
    return write_teacher_module(tmp_path, monkeypatch)
