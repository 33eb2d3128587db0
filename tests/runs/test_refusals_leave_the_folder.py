"""Every refused ``trickbag train`` leaves the run folder exactly as it was: every path, every byte, no lock file.

A table of bad inputs against real run folders: each is copied fresh, snapshotted (every file and folder, its
bytes), the command refused (exit 2, or 0 for a finished run, which says so), and the snapshot taken again. The
folders are copies without their ``.lock`` (as a folder copied from another machine, or one whose lock file a
user removed), so a lock file a refusal creates shows as a difference.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from trickbag.cli import main
from trickbag.runs.naming import LOCK

TINY = ["data.name=fake", "data.num_samples=120", "data.batch_size=16", "train.epochs=1", "run.progress=false",
        "run.plots=false", "log.tensorboard=false", "model.name=mlp", "--quiet"]


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (folders: None; files: their bytes), with ``root`` itself."""
    out: dict[str, bytes | None] = {".": None} if root.is_dir() else {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = None if path.is_dir() else path.read_bytes()
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished one-epoch run (its lock file removed, as in a copied folder)."""
    root = tmp_path_factory.mktemp("finished")
    assert main(["train", *TINY, f"run.dir={root}", "run.name=done"]) == 0
    run = root / "done"
    (run / LOCK).unlink()
    return run


def _unfinished(run: Path) -> None:
    (run / "summary.txt").unlink()  # killed before its test: a resume would finish it


def _foreign(run: Path) -> None:
    for p in list(run.iterdir()):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    (run / "notes.txt").write_text("my own folder\n")


def _checkpoints_a_file(run: Path) -> None:
    _unfinished(run)
    shutil.rmtree(run / "checkpoints")
    (run / "checkpoints").write_text("not a folder\n")


def _damaged_checkpoints(run: Path) -> None:
    _unfinished(run)
    for p in (run / "checkpoints").iterdir():
        p.write_bytes(p.read_bytes()[:100])


def _damaged_recipe(run: Path) -> None:
    (run / "recipe.yaml").write_text("train: {epochs: [\n")


CASES = {
    # name: (how the folder is changed first, the command's arguments after `train` (RUN: the folder), exit status)
    "finished run resumed": (None, ["--resume", "RUN"], 0),
    "resume with an unknown key": (_unfinished, ["--resume", "RUN", "train.bogus=1"], 2),
    "resume changing the model": (_unfinished, ["--resume", "RUN", "model.name=small_cnn"], 2),
    "resume changing a trained-in key": (_unfinished, ["--resume", "RUN", "optim.name=adamw"], 2),
    "resume with too few epochs": (_unfinished, ["--resume", "RUN", "train.epochs=0"], 2),
    "resume of a foreign folder": (_foreign, ["--resume", "RUN"], 2),
    "resume with checkpoints a file": (_checkpoints_a_file, ["--resume", "RUN"], 2),
    "resume with only damaged checkpoints": (_damaged_checkpoints, ["--resume", "RUN"], 2),
    "resume with a damaged recipe": (_damaged_recipe, ["--resume", "RUN"], 2),
    "resume with a recipe name": (_unfinished, ["--resume", "RUN", "digits"], 2),
    "resume of the folder as a recipe file": (_unfinished, ["RUN"], 2),
    "new run on the folder's name": (_unfinished, [*TINY, "run.dir=PARENT", "run.name=NAME"], 2),
}


def _args(args: list[str], run: Path) -> list[str]:
    sub = {"RUN": str(run), "run.dir=PARENT": f"run.dir={run.parent}", "run.name=NAME": f"run.name={run.name}"}
    return ["train", *(sub.get(a, a) for a in args)]


@pytest.mark.parametrize("case", list(CASES))
def test_a_refusal_leaves_the_run_folder_as_it_was(tmp_path, finished, capsys, case):
    change, args, code = CASES[case]
    run = tmp_path / "copy"
    shutil.copytree(finished, run)
    if change is not None:
        change(run)
    before = snapshot(tmp_path)
    rc = main(_args(args, run))
    err = capsys.readouterr().err
    assert rc == code, err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("trickbag: error: "), err
    assert snapshot(tmp_path) == before, sorted(set(snapshot(tmp_path)) ^ set(before)) or "bytes changed"


def test_checkpoints_a_file_is_named_before_training(tmp_path, finished, capsys):
    run = tmp_path / "copy"
    shutil.copytree(finished, run)
    _checkpoints_a_file(run)
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "checkpoints" in err and "not a folder" in err and "\n" not in err, err


def _lock_folder(run: Path, locked: bool) -> bool:
    """Make ``run`` unwritable (or writable again): ``chattr +i`` as root (root writes in a read-only folder),
    else permissions; False when neither can."""
    if os.geteuid() != 0:
        run.chmod(0o555 if locked else 0o755)
        return True
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i" if locked else "-i", str(run)], capture_output=True).returncode == 0


def test_a_resume_of_an_unwritable_folder_is_refused_and_leaves_it(tmp_path, finished, capsys):
    run = tmp_path / "copy"
    shutil.copytree(finished, run)
    _unfinished(run)
    before = snapshot(tmp_path)
    if not _lock_folder(run, True):
        pytest.skip("no way to make a folder unwritable here")
    try:
        assert (run / "probe").exists() is False
        with pytest.raises(OSError):
            (run / "probe").write_text("x")  # the folder is really unwritable (so the test can fail)
        rc = main(["train", "--resume", str(run)])
    finally:
        _lock_folder(run, False)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "cannot write in the run directory" in err and "\n" not in err, err
    assert snapshot(tmp_path) == before
