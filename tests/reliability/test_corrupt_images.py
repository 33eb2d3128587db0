"""A corrupt training image (``data.name=imagefolder``): left out before training, listed, and resume stays exact.

Every file is decoded once when the data are built, before the run folder exists, so which files are left out
depends on the files alone, never on timing, workers or the order of the epoch. The splits then equal those of
the same folder without the bad file (the independent reference); above ``data.max_corrupt`` the run is refused
in one line with nothing written; a resume keeps leaving out what the run left out and ends bit-identical.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from trickbag.cli import main
from trickbag.data.sources import build_data
from trickbag.errors import DataError
from trickbag.recipe import load_recipe

from ._helpers import load, run_inprocess, training_state_differences
from .killswitch import PLUGIN

RUN = ["data.name=imagefolder", "data.image_size=12", "model.name=small_cnn", "data.batch_size=8",
       "train.epochs=2", "run.progress=false", "run.plots=false", "log.tensorboard=false", "train.threads=1",
       "train.deterministic=true", "--quiet"]


def _pets(root: Path, per_class: int = 60) -> Path:
    rng = np.random.default_rng(0)
    for cls, base in (("cat", 40), ("dog", 210)):
        (root / cls).mkdir(parents=True)
        for i in range(per_class):
            img = np.clip(base + rng.normal(0, 20, (12, 12, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(img).save(root / cls / f"{i}.png")
    return root


def _truncate(path: Path) -> bytes:
    good = path.read_bytes()
    path.write_bytes(good[:60])  # its header reads, its pixels do not
    return good


def _files(splits) -> dict[str, list[str]]:
    """The files of each split, relative to the folder, in the split's order."""
    out = {}
    for name in ("train", "val", "test"):
        ds = getattr(splits, name)
        folder = ds.dataset
        root = Path(folder.root).parent if Path(folder.root).name in ("train", "val", "test") else Path(folder.root)
        out[name] = [Path(folder.samples[j][0]).relative_to(root).as_posix() for j in ds.indices]
    return out


def test_a_corrupt_image_is_left_out_and_the_splits_are_those_of_the_folder_without_it(tmp_path):
    pets = _pets(tmp_path / "pets")
    _truncate(pets / "dog" / "7.png")
    without = tmp_path / "without"
    shutil.copytree(pets, without)
    (without / "dog" / "7.png").unlink()
    splits = build_data(load_recipe(None, [f"data.root={pets}", *RUN[:-1]]).data)
    reference = build_data(load_recipe(None, [f"data.root={without}", *RUN[:-1]]).data)
    assert _files(splits) == _files(reference)
    assert sum(len(v) for v in _files(splits).values()) == 119
    assert [r for r, _ in splits.skipped] == ["dog/7.png"] and splits.fitted["skipped"] == ["dog/7.png"]
    assert any("dog/7.png" in n and "skipped_images.txt" in n for n in splits.notes)


def test_a_run_lists_what_it_left_out_and_resumes_to_the_uninterrupted_run(tmp_path, capsys, monkeypatch):
    pets = _pets(tmp_path / "pets")
    good = _truncate(pets / "dog" / "7.png")
    rc, out, err = run_inprocess(["train", f"data.root={pets}", *RUN, f"run.dir={tmp_path}", "run.name=ref"], capsys)
    assert rc == 0, err
    listed = (tmp_path / "ref" / "skipped_images.txt").read_text().splitlines()
    assert len(listed) == 1 and listed[0].startswith("dog/7.png\t")

    monkeypatch.setenv("TRICKBAG_TEST_KILL_AT", "sigint:15")  # inside epoch 2 (about 12 updates an epoch)
    rc, out, err = run_inprocess(["train", f"data.root={pets}", *RUN, f"run.dir={tmp_path}", "run.name=k", PLUGIN],
                                 capsys)
    assert rc == 130, err
    monkeypatch.delenv("TRICKBAG_TEST_KILL_AT")
    (pets / "dog" / "7.png").write_bytes(good)  # repaired meanwhile: the run still leaves it out, as it began
    rc, out, err = run_inprocess(["train", "--resume", str(tmp_path / "k"), "--quiet"], capsys)
    assert rc == 0, err
    ref, got = load(tmp_path / "ref" / "checkpoints" / "last.pt"), load(tmp_path / "k" / "checkpoints" / "last.pt")
    assert training_state_differences(ref, got) == []


def test_an_image_that_breaks_after_the_run_began_refuses_the_resume(tmp_path, capsys, monkeypatch):
    pets = _pets(tmp_path / "pets", per_class=20)
    monkeypatch.setenv("TRICKBAG_TEST_KILL_AT", "sigint:3")
    rc, _, err = run_inprocess(["train", f"data.root={pets}", *RUN, f"run.dir={tmp_path}", "run.name=k", PLUGIN],
                               capsys)
    assert rc == 130, err
    monkeypatch.delenv("TRICKBAG_TEST_KILL_AT")
    _truncate(pets / "cat" / "3.png")
    rc, _, err = run_inprocess(["train", "--resume", str(tmp_path / "k"), "--quiet"], capsys)
    assert rc == 2 and "cat/3.png" in err and "can no longer be read" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("bad, extra", [(3, []), (1, ["data.max_corrupt=0"])], ids=["above-1%", "none-allowed"])
def test_above_max_corrupt_the_run_is_refused_before_anything_is_written(tmp_path, capsys, bad, extra):
    pets = _pets(tmp_path / "pets", per_class=20)
    for i in range(bad):
        _truncate(pets / "cat" / f"{i}.png")
    rc = main(["train", f"data.root={pets}", *RUN, *extra, f"run.dir={tmp_path / 'runs'}", "run.name=x"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err, err
    assert f"{bad} of 40 images cannot be read" in err and "'cat/0.png'" in err and "data.max_corrupt=" in err
    assert not (tmp_path / "runs").exists()


def test_the_check_does_not_depend_on_the_threshold_only(tmp_path):
    """A folder whose files all read leaves nothing out, whatever data.max_corrupt allows."""
    pets = _pets(tmp_path / "pets", per_class=10)
    splits = build_data(load_recipe(None, [f"data.root={pets}", *RUN[:-1], "data.max_corrupt=1"]).data)
    assert splits.skipped == [] and sum(len(v) for v in _files(splits).values()) == 20
    (pets / "cat" / "0.png").write_bytes(b"not an image")
    with pytest.raises(DataError, match="1 of 20 images cannot be read"):
        build_data(load_recipe(None, [f"data.root={pets}", *RUN[:-1]]).data)
