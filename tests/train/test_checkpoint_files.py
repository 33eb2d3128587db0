"""Checkpoint files: atomic writes (a failure mid-write leaves the old file) and weights_only loading."""

from __future__ import annotations

import pathlib

import pytest
import torch

from trickbag.errors import CheckpointError
from trickbag.train.checkpoint_files import atomic_write_text, load_checkpoint, save_checkpoint


class Boom(Exception):
    pass


def _temp_files(directory: pathlib.Path) -> list[pathlib.Path]:
    return [p for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_round_trip_keeps_tensors_and_plain_data(tmp_path):
    obj = {"model": {"w": torch.arange(6.0).view(2, 3)}, "step": 7, "name": "a", "hist": [{"loss": 0.5}],
           "rng": (1, (2, 3), None)}
    save_checkpoint(tmp_path / "c.pt", obj)
    back = load_checkpoint(tmp_path / "c.pt")
    assert torch.equal(back["model"]["w"], obj["model"]["w"])
    assert (back["step"], back["name"], back["hist"], back["rng"]) == (7, "a", [{"loss": 0.5}], (1, (2, 3), None))
    assert _temp_files(tmp_path) == []


@pytest.mark.parametrize("error", [Boom("crash during write"), OSError(28, "No space left on device")])
def test_a_failure_before_the_rename_leaves_the_old_checkpoint_and_no_temp_file(
    tmp_path, monkeypatch, error, fault_before_rename
):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"step": 1, "w": torch.ones(3)})
    seen = []

    def fault(tmp: pathlib.Path) -> None:
        seen.append((tmp.parent == path.parent, tmp.exists(), tmp.stat().st_size > 0))
        raise error

    fault_before_rename(fault)
    with pytest.raises((Boom, CheckpointError)) as info:
        save_checkpoint(path, {"step": 2, "w": torch.zeros(3)})
    if isinstance(error, OSError):  # I/O errors become one CheckpointError saying the old file is intact
        assert isinstance(info.value, CheckpointError) and "intact" in str(info.value)
    assert seen == [(True, True, True)]  # the new data was fully written to a temp file in the same dir
    back = load_checkpoint(path)
    assert back["step"] == 1 and torch.equal(back["w"], torch.ones(3))
    assert _temp_files(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_atomic_text_write_is_all_or_nothing(tmp_path, monkeypatch, fault_before_rename):
    path = tmp_path / "metrics.csv"
    atomic_write_text(path, "a,b\n1,2\n")

    def fault(tmp):
        raise Boom()

    fault_before_rename(fault)
    with pytest.raises(Boom):
        atomic_write_text(path, "a,b\n1,2\n3,4\n")
    assert path.read_text() == "a,b\n1,2\n"
    assert _temp_files(tmp_path) == []


class WritesMarker:
    """Unpickling this object writes a file: what an attacker's checkpoint would do."""

    def __init__(self, marker: pathlib.Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.write_text, (pathlib.Path(self.marker), "code ran"))


def test_weights_only_refuses_a_pickle_that_would_run_code(tmp_path):
    probe_marker, marker = tmp_path / "probe-ran", tmp_path / "ran"
    # the payload really runs under a plain (unsafe) unpickler ...
    torch.save({"model": {}, "evil": WritesMarker(probe_marker)}, tmp_path / "probe.pt")
    torch.load(tmp_path / "probe.pt", weights_only=False)  # noqa: TB403 (shows what an unsafe load would do)
    assert probe_marker.read_text() == "code ran"
    # ... and load_checkpoint refuses it before it can
    torch.save({"model": {}, "evil": WritesMarker(marker)}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path / "evil.pt")
    assert not marker.exists()
    msg = str(info.value)
    assert "evil.pt" in msg and "refused" in msg and "\n" not in msg


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.mkdir(), "directory"),
        (lambda p: p.write_bytes(b""), "empty|cut short|not"),
        (lambda p: p.write_bytes(b"not a checkpoint at all"), "not"),
        (lambda p: torch.save([1, 2, 3], p), "not a checkpoint dict|list"),
    ],
    ids=["missing", "directory", "empty", "garbage", "not_a_dict"],
)
def test_unreadable_checkpoints_raise_one_line_errors(tmp_path, make, match):
    path = tmp_path / "c.pt"
    make(path)
    with pytest.raises(CheckpointError, match=match) as info:
        load_checkpoint(path)
    assert "\n" not in str(info.value) and "c.pt" in str(info.value)


def test_truncated_checkpoint_is_refused(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"w": torch.randn(1000)})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="c.pt"):
        load_checkpoint(path)


def test_unwritable_directory_is_a_checkpoint_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CheckpointError, match="could not write"):
        save_checkpoint(blocker / "sub" / "c.pt", {"a": 1})  # parent is a file: mkdir fails


def test_atomic_files_get_the_mode_a_plain_open_would(tmp_path):
    import os

    from trickbag.train.checkpoint_files import atomic_write_text

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic = tmp_path / "atomic.txt"
    atomic_write_text(atomic, "x")
    assert (atomic.stat().st_mode & 0o777) == (plain.stat().st_mode & 0o777)
    assert os.access(atomic, os.R_OK)
