"""Atomic writes: a failed or interrupted write never damages the previous file.

Faults are injected with the ``fault_before_rename`` fixture (called after the data is in
the temporary file, before the rename): OSError(ENOSPC) for a full disk, EACCES / EROFS for lost
permissions, KeyboardInterrupt for a crash. A real SIGKILL during a write is in test_resume_kill.
"""

from __future__ import annotations

import errno
import os

import pytest
import torch

from trickbag.errors import CheckpointError, TrickbagError
from trickbag.train.checkpoint_files import WriteError, atomic_write_text, load_checkpoint, save_checkpoint

from ._helpers import csv_without_times, load, run_inprocess, training_state_differences, write_recipe


def _oserror(code: int):
    def hook(tmp):
        raise OSError(code, os.strerror(code), str(tmp))

    return hook


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EDQUOT])
def test_failed_checkpoint_write_leaves_previous_file_and_no_temporary(
    tmp_path, monkeypatch, code, fault_before_rename
):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"step": 1, "w": torch.arange(4.0)})
    before = path.read_bytes()
    fault_before_rename(_oserror(code))
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(path, {"step": 2, "w": torch.zeros(4)})
    message = str(info.value)
    assert os.strerror(code) in message and "previous checkpoint is intact" in message
    assert "\n" not in message
    assert path.read_bytes() == before
    assert load_checkpoint(path)["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]  # the temporary file is gone


def test_crash_during_write_keeps_previous_file_and_readers_never_see_a_partial_one(
    tmp_path, monkeypatch, fault_before_rename
):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"step": 1})
    seen = {}

    def crash(tmp):
        seen["during"] = load_checkpoint(path)["step"]  # the real name still holds the old file
        seen["tmp_in_same_dir"] = tmp.parent == path.parent
        raise KeyboardInterrupt

    fault_before_rename(crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"step": 2})
    assert seen == {"during": 1, "tmp_in_same_dir": True}
    assert load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_real_os_error_is_one_clear_line(tmp_path):
    (tmp_path / "checkpoints").write_text("a file where the directory should be")
    with pytest.raises(CheckpointError, match="could not write checkpoint .*previous checkpoint is intact"):
        save_checkpoint(tmp_path / "checkpoints" / "last.pt", {"step": 1})


def test_text_files_fail_with_write_error_and_keep_old_content(tmp_path, monkeypatch, fault_before_rename):
    path = tmp_path / "metrics.csv"
    atomic_write_text(path, "epoch,step\n0,9\n")
    fault_before_rename(_oserror(errno.ENOSPC))
    with pytest.raises(WriteError) as info:
        atomic_write_text(path, "epoch,step\n0,9\n1,18\n")
    assert isinstance(info.value, OSError) and isinstance(info.value, TrickbagError)
    assert "No space left on device" in str(info.value) and "intact" in str(info.value)
    assert path.read_text() == "epoch,step\n0,9\n"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.csv"]


def test_failed_save_does_not_change_the_trainer_state(tmp_path, monkeypatch, fault_before_rename):
    from torch.utils.data import DataLoader, TensorDataset

    from trickbag.train.trainer import Trainer

    torch.manual_seed(0)
    x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    model = torch.nn.Linear(4, 3)
    t = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                DataLoader(TensorDataset(x, y), batch_size=8), device="cpu", max_epochs=1)
    t.fit()
    t.save_checkpoint(tmp_path / "a.pt")
    before = t.state_dict()
    fault_before_rename(_oserror(errno.ENOSPC))
    with pytest.raises(CheckpointError):
        t.save_checkpoint(tmp_path / "a.pt")
    fault_before_rename(None)
    after = t.state_dict()
    assert [k for k in before if not _same(before[k], after[k])] == []
    assert _same(load_checkpoint(tmp_path / "a.pt")["model"], before["model"])


def _same(a, b) -> bool:
    from ._helpers import differences

    return differences(a, b) == []


@pytest.mark.parametrize("target", ["step-00000012.pt", "metrics.csv"])
def test_disk_full_during_training_stops_cleanly_and_resume_is_exact(tmp_path, reference_run, monkeypatch,
                                                                     capsys, target, fault_before_rename):
    """The write of ``target`` fails with ENOSPC: one-line error naming the resume command, exit 1 (a failure
    in training),
    earlier checkpoints intact; after "freeing space" the resumed run ends identical to the reference."""
    recipe = write_recipe(tmp_path)
    run = tmp_path / "runs" / "k"

    def full_for_target(tmp):
        if tmp.name.startswith(f".{target}."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    fault_before_rename(full_for_target)
    rc, out, err = run_inprocess(["train", str(recipe), f"run.dir={tmp_path / 'runs'}", "run.name=k", "--quiet"],
                                 capsys)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith("trickbag: error: ") and "No space left on device" in lines[0]
    assert f"trickbag train --resume {run}" in lines[0]
    assert "Traceback" not in err
    ckpts = run / "checkpoints"
    assert not list(ckpts.glob(".*.tmp")) and not list(run.glob(".*.tmp"))
    assert not (ckpts / target).exists()
    # what was written before the failure is intact and loadable
    if target == "metrics.csv":  # the first epoch-end write fails: step-8 is the newest checkpoint
        assert load(ckpts / "step-00000008.pt")["counters"]["step"] == 8
    else:  # fails during epoch 2: epoch 1's last.pt and step-8 are intact
        assert load(ckpts / "last.pt")["counters"]["step"] == 9
        assert load(ckpts / "step-00000008.pt")["counters"]["step"] == 8

    fault_before_rename(None)
    rc, out, err = run_inprocess(["train", "--resume", str(run), "--quiet"], capsys)
    assert rc == 0, err
    ref, got = load(reference_run / "checkpoints" / "last.pt"), load(ckpts / "last.pt")
    assert training_state_differences(ref, got) == []
    assert csv_without_times(reference_run / "metrics.csv") == csv_without_times(run / "metrics.csv")
