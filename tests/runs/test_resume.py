"""The resume contract: safe overrides only, epochs re-planned (the LR never climbs back), a finished run
says so, recipe.yaml and resumes.log say what ran, wall time summed over sessions."""

from __future__ import annotations

import csv
import json

import pytest

from trickbag.errors import RecipeError
from trickbag.runs.run import RunFinished, resume_run, run_recipe
from trickbag.train.checkpoint import load_checkpoint
from trickbag.train.plugin import Plugin
from trickbag.train.state import StopReason


class StopAtEpoch(Plugin):
    """Stops the run at the end of epoch ``n`` (1-based), as an interrupted run would be."""

    def __init__(self, n: int) -> None:
        self.n = n

    def on_epoch_end(self, state):
        if state.epoch + 1 == self.n:
            state.stop(StopReason.INTERRUPTED, "test")


def _lr_per_update(run_dir):
    with open(run_dir / "metrics.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("train/step_loss")]
    return [(int(r["step"]), float(r["lr/group0"])) for r in rows]


def test_a_longer_run_on_resume_replans_the_schedule_and_the_lr_never_climbs(tiny_recipe):
    base = ["log.every_steps=1", "schedule.warmup_epochs=0", "run.plots=false", "log.tensorboard=false"]
    first = run_recipe(tiny_recipe(*base, "train.epochs=4"), plugins=[StopAtEpoch(2)], quiet=True)
    assert len(first.history) == 2
    result = resume_run(first.run_dir, ["train.epochs=6"], quiet=True)
    lrs = [lr for _, lr in _lr_per_update(result.run_dir)]
    assert len(result.history) == 6 and lrs[-1] < 1e-4
    assert all(b <= a + 1e-12 for a, b in zip(lrs, lrs[1:])), "the cosine never rises after the re-plan"
    assert "epochs: 6" in (result.run_dir / "recipe.yaml").read_text()
    log = [json.loads(line) for line in (result.run_dir / "resumes.log").read_text().splitlines()]
    assert log[-1]["changes"]["train.epochs"] == [4, 6] and log[-1]["checkpoint"] == "last.pt"


def test_a_finished_run_says_so_and_changes_nothing(tiny_recipe, capsys):
    from trickbag.cli import main

    done = run_recipe(tiny_recipe("run.plots=false", "log.tensorboard=false"), quiet=True)
    summary = (done.run_dir / "summary.txt").read_text()
    capsys.readouterr()
    assert main(["train", "--resume", str(done.run_dir)]) == 0
    out = capsys.readouterr().out
    assert "is finished: 2 of 2 epochs" in out and f"--resume {done.run_dir} train.epochs=3" in out
    assert (done.run_dir / "summary.txt").read_text() == summary
    with pytest.raises(RunFinished):
        resume_run(done.run_dir, quiet=True)


def test_extending_a_run_whose_schedule_ended_at_lr_0_says_the_extra_epochs_will_not_train(tiny_recipe, capsys):
    done = run_recipe(tiny_recipe("run.plots=false", "log.tensorboard=false", "schedule.warmup_epochs=0"), quiet=True)
    capsys.readouterr()
    result = resume_run(done.run_dir, ["train.epochs=3"])
    out = capsys.readouterr().out
    assert "the schedule had ended and stays at its final LR of 0: the extra epochs leave the weights" in out
    assert "model.weights=RUN/checkpoints/last.pt" in out
    assert len(result.history) == 3


def test_an_unsafe_override_is_refused_naming_the_key_and_nothing_changes(tiny_recipe):
    first = run_recipe(tiny_recipe("train.epochs=3", "run.plots=false", "log.tensorboard=false"),
                       plugins=[StopAtEpoch(1)], quiet=True)
    before = load_checkpoint(first.run_dir / "checkpoints" / "last.pt")["counters"]
    recipe_before = (first.run_dir / "recipe.yaml").read_text()
    for override, key in (("optim.momentum=0.5", "optim.momentum"), ("model.kwargs={width: 8}", "model.kwargs"),
                          ("tricks.mix.enabled=true", "tricks.mix.enabled")):
        with pytest.raises(RecipeError, match=f"--resume cannot change {key} "):
            resume_run(first.run_dir, [override], quiet=True)
    assert load_checkpoint(first.run_dir / "checkpoints" / "last.pt")["counters"] == before
    assert (first.run_dir / "recipe.yaml").read_text() == recipe_before
    assert not (first.run_dir / "resumes.log").exists()


def test_a_new_lr_on_resume_scales_the_schedule_from_there(tiny_recipe):
    base = ["log.every_steps=1", "schedule.name=constant", "schedule.warmup_epochs=0", "train.epochs=3",
            "run.plots=false", "log.tensorboard=false", "optim.lr=0.08"]
    first = run_recipe(tiny_recipe(*base), plugins=[StopAtEpoch(1)], quiet=True)
    steps_done = first.updates
    result = resume_run(first.run_dir, ["optim.lr=0.02"], quiet=True)
    lrs = dict(_lr_per_update(result.run_dir))
    assert {lr for step, lr in lrs.items() if step <= steps_done} == {0.08}
    assert {lr for step, lr in lrs.items() if step > steps_done} == {0.02}


def test_wall_time_is_the_sum_over_sessions(tiny_recipe):
    first = run_recipe(tiny_recipe("train.epochs=3", "run.plots=false", "log.tensorboard=false"),
                       plugins=[StopAtEpoch(1)], quiet=True)
    second = resume_run(first.run_dir, quiet=True)
    clock = load_checkpoint(second.run_dir / "checkpoints" / "last.pt")["plugins"]["clock"]["wall_time_s"]
    assert second.wall_time_s > first.wall_time_s and abs(clock - second.wall_time_s) < 5.0
    assert f"wall time  {second.wall_time_s:.1f} s for 3 epochs" in (second.run_dir / "summary.txt").read_text()


def test_shortening_below_the_epochs_done_is_refused(tiny_recipe):
    first = run_recipe(tiny_recipe("train.epochs=4", "run.plots=false", "log.tensorboard=false"),
                       plugins=[StopAtEpoch(2)], quiet=True)
    with pytest.raises(RecipeError, match="train.epochs=1 is below the 2 epochs"):
        resume_run(first.run_dir, ["train.epochs=1"], quiet=True)
