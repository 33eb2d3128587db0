"""dist.strategy=fsdp in one process (a gloo group of one, FSDP2 on it): refusals in one line, the sharded checkpoint
format, a save killed midway, reading a sharded checkpoint without a process group. The several-process behaviour
is in tests/distributed/test_fsdp.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as torch_dist

from trickbag.errors import ConflictError, RecipeError
from trickbag.recipe import load_recipe
from trickbag.train import sharded
from trickbag.train.build import build
from trickbag.train.checkpoint_files import load_checkpoint
from trickbag.train.plugins.run_folder import remove_stale_temporaries
from trickbag.tricks import build_tricks

pytestmark = pytest.mark.skipif(not torch_dist.is_available() or not torch_dist.is_gloo_available(),
                                reason="torch built without distributed/gloo support")

FAKE = ["data.name=fake", "data.num_samples=80", "data.shape=[1,8,8]", "data.batch_size=8", "model.name=small_cnn",
        "train.epochs=1", "schedule.warmup_epochs=0", "dist.strategy=fsdp", "train.threads=1"]


@pytest.mark.parametrize("trick", ["swa", "l1", "channels_last", "distillation"])
def test_tricks_that_cannot_run_on_shards_are_refused_in_one_line(trick: str) -> None:
    recipe = load_recipe("digits", [*FAKE, f"tricks.{trick}.enabled=true"])
    with pytest.raises(ConflictError) as err:
        build_tricks(recipe)
    msg = str(err.value)
    assert "\n" not in msg and f"tricks.{trick}" in msg and "dist.strategy=fsdp" in msg and "dist.strategy=ddp" in msg


@pytest.mark.parametrize("override", ["optim.name=lamb", "optim.lookahead_k=3"])
def test_optimizers_that_cannot_run_on_shards_are_refused_before_any_data(override: str) -> None:
    with pytest.raises(RecipeError) as err:
        build(load_recipe("digits", [*FAKE, override, "data.name=imagefolder", "data.root=/nonexistent"]))
    assert "\n" not in str(err.value) and override.split("=")[0] in str(err.value)


def test_half_gathers_with_batchnorm_need_autocast() -> None:
    with pytest.raises(RecipeError, match=r"dist.param_dtype=bfloat16 .* set train.precision=bf16"):
        build(load_recipe("digits", [*FAKE, "dist.param_dtype=bfloat16"]))


def test_the_command_line_refuses_a_refused_trick_with_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "trickbag", "train", "digits", *FAKE, "tricks.swa.enabled=true",
                           f"run.dir={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "tricks.swa" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def group_of_one():
    with sharded.single_process_group(torch.device("cpu")):
        yield


def test_a_sharded_checkpoint_reads_back_whole_and_a_save_killed_midway_leaves_the_last_one(
        group_of_one: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, _ = build(load_recipe("digits", [*FAKE, "tricks.ema.enabled=true"]))
    trainer.fit()
    (tmp_path / "checkpoints").mkdir()
    path = tmp_path / "checkpoints" / "last.pt"
    trainer.save_checkpoint(path)
    raw = torch.load(path, weights_only=True)  # the file itself: placeholders, the shards beside it
    folder = path.parent / raw["shards"]
    assert (folder / ".metadata").is_file() and sharded.has_placeholders(raw["model"])
    whole = load_checkpoint(path)
    expected = {k: v.full_tensor() if sharded.is_dtensor(v) else v for k, v in trainer.model.state_dict().items()}
    assert whole["model"].keys() == expected.keys()
    for k, v in expected.items():
        assert torch.equal(whole["model"][k], v), k
    assert "shards" not in whole and not sharded.has_placeholders(whole)

    def killed(tensors, where):  # every rank's shards written in part, then the process dies
        Path(where).mkdir()
        (Path(where) / "__0_0.distcp").write_bytes(b"partial")
        raise KeyboardInterrupt
    monkeypatch.setattr("trickbag.train.persistence.save_shards", killed)
    with pytest.raises(KeyboardInterrupt):
        trainer.save_checkpoint(path)
    again = load_checkpoint(path)  # the previous checkpoint, whole
    for k, v in expected.items():
        assert torch.equal(again["model"][k], v), k
    assert len(sharded.shards_of(path)) == 2  # the one last.pt names, and the killed save's
    removed = remove_stale_temporaries(tmp_path)  # as a resume does, under the run's lock
    assert [p.name for p in removed] != [] and [p.name for p in sharded.shards_of(path)] == [raw["shards"]]
    monkeypatch.undo()
    trainer.save_checkpoint(path)  # the next save removes the folders no file names
    assert [p.name for p in sharded.shards_of(path)] == [torch.load(path, weights_only=True)["shards"]]


def test_a_sharded_checkpoint_without_its_folder_is_one_clear_error(group_of_one: None, tmp_path: Path) -> None:
    from trickbag.errors import CheckpointError

    trainer, _ = build(load_recipe("digits", FAKE))
    path = tmp_path / "step-1.pt"
    trainer.save_checkpoint(path)
    for folder in sharded.shards_of(path):
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    with pytest.raises(CheckpointError, match="is sharded, and its shards folder .* is missing"):
        load_checkpoint(path)
