"""``trickbag cooldown``: a wsd run branched at one of its checkpoints decays from that update, in a new folder."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from trickbag.cli import main
from trickbag.recipe import load_recipe
from trickbag.runs.run import run_recipe

TINY = ["data.name=fake", "data.num_samples=200", "data.batch_size=16", "model.name=mlp", "train.epochs=4",
        "schedule.name=wsd", "schedule.warmup_epochs=0.5", "train.checkpoint_every_steps=4",
        "train.keep_checkpoints=20", "log.every_steps=1", "log.tensorboard=false", "run.plots=false",
        "run.progress=false", "optim.lr=0.1"]


def lrs(run: Path) -> dict[int, float]:
    with open(run / "metrics.csv", newline="") as fh:
        return {int(r["step"]): float(r["lr/group0"]) for r in csv.DictReader(fh) if r["lr/group0"]}


@pytest.fixture(scope="module")
def wsd_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("cooldown")
    return run_recipe(load_recipe("digits", [*TINY, f"run.dir={where}", "run.name=w"]), quiet=True).run_dir


def test_the_branch_decays_from_the_chosen_update_to_the_end_of_the_given_epoch(wsd_run: Path, capsys) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in (wsd_run / "checkpoints").iterdir()}
    original = lrs(wsd_run)
    n = 12  # a step checkpoint in the stable phase
    assert original[n] == original[n + 4] == pytest.approx(0.1)
    assert main(["cooldown", str(wsd_run), "--from", f"step-{n:08d}.pt", "--epochs", "3", "--quiet"]) == 0
    branch = wsd_run.parent / f"w-cooldown-{n}"
    got = lrs(branch)
    end = max(got)
    assert end == 3 * (len(original) // 4)  # ends at the end of epoch 3 (the run made as many updates per epoch)
    for t, lr in got.items():
        if t <= n:
            assert lr == pytest.approx(original[t], abs=1e-12), t  # the history up to the branch point
        else:  # 1-sqrt decay from the peak at n to 0 at the end (schedule.decay_shape's default)
            assert lr == pytest.approx(0.1 * (1 - math.sqrt((t - n) / (end - n))), rel=1e-5, abs=1e-9), t
    assert got[end] == 0.0
    after = {p.name: p.stat().st_mtime_ns for p in (wsd_run / "checkpoints").iterdir()}
    assert after == before  # the original run is not touched
    assert (branch / "summary.txt").is_file()


def test_bad_requests_are_one_line_exit_2(wsd_run: Path, tmp_path: Path, capsys) -> None:
    assert main(["cooldown", str(wsd_run), "--from", "step-99999999.pt", "--epochs", "3"]) == 2
    assert "no such checkpoint" in capsys.readouterr().err
    assert main(["cooldown", str(wsd_run), "--from", "last.pt", "--epochs", "2"]) == 2  # last.pt is at epoch 4
    assert "--epochs must be at least 4" in capsys.readouterr().err
    cosine = run_recipe(load_recipe("digits", [*TINY, "schedule.name=cosine", "train.epochs=1", f"run.dir={tmp_path}",
                                              "run.name=c"]), quiet=True).run_dir
    assert main(["cooldown", str(cosine), "--epochs", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "schedule.name=wsd" in err
