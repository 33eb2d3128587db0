"""Full disks, read-only folders and file size limits: one line naming the path and what to do, exit 1
(2 before training starts), the previous checkpoint intact, and the run resumable afterwards.

torch's zip writer reports a failed write as ``RuntimeError("... unexpected pos ...")``, not OSError;
these tests go through torch.save itself: a real per-process file size limit (``ulimit -f``) in a
subprocess, and a file whose writes fail with ENOSPC after a few kilobytes.
"""

from __future__ import annotations

import errno
import io
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trickbag import _files
from trickbag.errors import CheckpointError
from trickbag.train.checkpoint_files import load_checkpoint, save_checkpoint

from ._helpers import load, run_inprocess, run_subprocess, write_recipe


class _FillsUp(io.RawIOBase):
    """A file that takes ``room`` bytes, then fails every write with ENOSPC, as a full disk does."""

    def __init__(self, fh, room: int) -> None:
        self.fh, self.room = fh, room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.fh.write(data)

    def fileno(self) -> int:
        return self.fh.fileno()

    def flush(self) -> None:
        if not self.fh.closed:
            self.fh.flush()

    def close(self) -> None:
        self.fh.close()
        super().close()


@pytest.fixture()
def disk_with_room(monkeypatch):
    """``disk_with_room(n, suffix)``: every atomic write after it of a file named ``*suffix`` can put only
    ``n`` bytes in it."""

    def install(room: int, suffix: str = "") -> None:
        real = os.fdopen

        class _Os:
            def __getattr__(self, name):
                return getattr(os, name)

            @staticmethod
            def fdopen(fd, mode="r", *a, **k):
                fh = real(fd, mode, *a, **k)
                name = os.readlink(f"/proc/self/fd/{fd}")  # the temporary: .<target>.<random>.tmp
                return _FillsUp(fh, room) if name.rsplit(".", 2)[0].endswith(suffix) else fh

        monkeypatch.setattr(_files, "os", _Os())

    return install


def test_torch_zip_writer_failure_on_a_full_disk_is_one_line_and_keeps_the_old_file(tmp_path, disk_with_room):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"step": 1, "w": torch.arange(4.0)})
    disk_with_room(4096)
    big = {"step": 2, "w": torch.zeros(100_000)}
    with pytest.raises(RuntimeError) as raw:  # what torch itself raises: not an OSError
        with _files.os.fdopen(os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT), "wb") as fh:
            torch.save(big, fh)
    assert not isinstance(raw.value, OSError) and isinstance(raw.value.__context__, OSError)
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(path, big)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert "No space left on device" in message and "MB free in" in message and "0.4 MB needed" in message
    assert "run.dir" in message and "previous checkpoint is intact" in message
    assert load_checkpoint(path)["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt", "probe"]  # no temporary left


def test_a_run_that_fills_the_disk_stops_with_one_line_and_resumes(tmp_path, capsys, disk_with_room):
    recipe = write_recipe(tmp_path)
    run = tmp_path / "runs" / "full"
    disk_with_room(600, ".pt")  # the text files fit, no checkpoint does
    rc, out, err = run_inprocess(["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=full", "--quiet"],
                                 capsys)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("trickbag: error: could not write checkpoint") and "No space left on device" in lines[0]
    assert f"trickbag train --resume {run}" in lines[0]
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    _files.os = os  # space freed
    rc, out, err = run_inprocess(["train", "--resume", str(run), "--quiet"], capsys)
    assert rc == 0, err
    assert load(run / "checkpoints" / "last.pt")["counters"]["epoch"] == 3


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))


def test_real_file_size_limit_in_torch_save_is_one_line_and_the_run_resumes(tmp_path):
    """A real failing write inside torch.save (``ulimit -f`` 100 kB; the checkpoint needs ~300 kB)."""
    args = ["train", "digits", "train.epochs=1", "model.name=mlp", "model.kwargs={hidden: [512]}", "run.plots=false",
            "log.tensorboard=false", f"run.dir={tmp_path}", "run.name=big", "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-m", "trickbag", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=_limit_file_size)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "could not write checkpoint" in lines[0] and "File too large" in lines[0] and "ulimit -f" in lines[0]
    assert f"trickbag train --resume {tmp_path / 'big'}" in lines[0]
    assert not [p for p in (tmp_path / "big").rglob("*") if p.name.endswith(".tmp")]
    resumed = run_subprocess(["train", "--resume", str(tmp_path / "big"), "--quiet"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert load(tmp_path / "big" / "checkpoints" / "last.pt")["counters"]["epoch"] == 1


def test_read_only_run_dir_is_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    recipe = write_recipe(tmp_path)

    def read_only(self, *a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    rc, out, err = run_inprocess(["train", str(recipe), f"run.dir={tmp_path / 'ro'}", "run.name=x"], capsys)
    assert rc == 2 and err.strip().count("\n") == 0, err
    assert err.startswith(f"trickbag: error: cannot create the run directory '{tmp_path / 'ro' / 'x'}': "
                          "Read-only file system") and "writable" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yaml"]


def test_resume_of_a_run_on_a_read_only_disk_says_to_copy_it(tmp_path, capsys, monkeypatch):
    recipe = write_recipe(tmp_path)
    rc, _, err = run_inprocess(["train", str(recipe), f"run.dir={tmp_path}", "run.name=r", "train.epochs=1",
                                "--quiet"], capsys)
    assert rc == 0, err
    before = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    import trickbag.train.plugins.run_folder as runfolder  # the run lock lives there

    real_open = os.open

    class _Os:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def open(path, flags, *a):
            if flags & os.O_CREAT:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real_open(path, flags, *a)

    monkeypatch.setattr(runfolder, "os", _Os())
    rc, out, err = run_inprocess(["train", "--resume", str(tmp_path / "r"), "train.epochs=2"], capsys)
    assert rc == 2 and err.strip().count("\n") == 0, err
    assert "cannot write in the run directory" in err and "Read-only file system" in err and "--resume COPY" in err
    assert {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()} == before
