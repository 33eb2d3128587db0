"""The resume contract: safe overrides only, epochs re-planned (the LR never climbs back), a finished run
says so, recipe.yaml and resumes.log say what ran, wall time summed over sessions."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch

from trickbag.errors import RecipeError
from trickbag.plugin.interface import Plugin
from trickbag.plugin.state import StopReason
from trickbag.runs.run import RunFinished, resume_run, run_recipe
from trickbag.train.checkpoint_files import load_checkpoint


class StopAtEpoch(Plugin):
    """Stops the run at the end of epoch ``n`` (1-based), as an interrupted run would be."""

    def __init__(self, n: int) -> None:
        self.n = n

    def on_epoch_end(self, state):
        if state.epoch + 1 == self.n:
            state.stop(StopReason.INTERRUPTED, "test")


def _lr_per_update(run_dir):  # metrics.csv keeps 6 significant digits
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


def _restart_lr(t, t0, total, warm, peak):
    """The LR of update t (0-based) of a warm restart at t0: linear warm-up over ``warm`` updates from
    peak / (warm + 1) to ``peak``, then a cosine to 0 at ``total`` (written out here, independently)."""
    if t < t0 + warm:
        return peak * (t - t0 + 1) / (warm + 1)
    return peak * (1 + math.cos(math.pi * (t - t0 - warm) / (total - t0 - warm))) / 2


def test_training_longer_after_the_schedule_ended_restarts_it_and_the_weights_change(tiny_recipe, capsys):
    base = ["run.plots=false", "log.tensorboard=false", "schedule.warmup_epochs=0", "log.every_steps=1"]
    done = run_recipe(tiny_recipe(*base), quiet=True)
    hint = capsys.readouterr()
    with pytest.raises(RunFinished, match=r"train.epochs=3") as finished:
        resume_run(done.run_dir, quiet=True)
    assert "restart" in str(finished.value)  # the hint says what the extra epochs will do
    before = load_checkpoint(done.run_dir / "checkpoints" / "last.pt")["model"]
    t0 = done.updates
    result = resume_run(done.run_dir, ["train.epochs=3"])
    out = capsys.readouterr().out
    assert hint is not None and "stays at its final LR" not in out
    total = result.updates
    warm = min(max(1, (total - t0) // 10), total - t0 - 1)
    peak = 0.1 * 0.05  # RESTART_PEAK x the recipe's optim.lr
    assert f"restarts: a warm-up over {warm} update" in out and f"to {peak:g}" in out, out
    logged = dict(_lr_per_update(result.run_dir))
    extra = {s: lr for s, lr in logged.items() if t0 < s < total}  # logged after update s: the LR of update s
    assert extra and all(lr == pytest.approx(_restart_lr(s, t0, total, warm, peak), rel=1e-4, abs=1e-9)
                         for s, lr in extra.items())
    assert min(extra.values()) > 0 and max(extra.values()) == pytest.approx(peak, rel=0.05)
    after = load_checkpoint(result.run_dir / "checkpoints" / "last.pt")["model"]
    assert any(not torch.equal(before[k], after[k]) for k in before if before[k].is_floating_point())
    log = [json.loads(line) for line in (result.run_dir / "resumes.log").read_text().splitlines()]
    assert log[-1]["changes"]["train.epochs"] == [2, 3] and any("restarts" in n for n in log[-1]["notes"])


def test_a_restart_peaks_at_the_lr_given_with_the_longer_run(tiny_recipe, capsys):
    base = ["run.plots=false", "log.tensorboard=false", "schedule.warmup_epochs=0", "log.every_steps=1"]
    done = run_recipe(tiny_recipe(*base), quiet=True)
    t0 = done.updates
    result = resume_run(done.run_dir, ["train.epochs=4", "optim.lr=0.02"], quiet=True)
    warm = min(max(1, (result.updates - t0) // 10), result.updates - t0 - 1)
    extra = {s: lr for s, lr in _lr_per_update(result.run_dir) if t0 < s < result.updates}
    assert all(lr == pytest.approx(_restart_lr(s, t0, result.updates, warm, 0.02), rel=1e-4, abs=1e-9)
               for s, lr in extra.items())


def test_a_finished_onecycle_run_gives_a_command_that_trains(tiny_recipe, capsys):
    from trickbag.cli import main

    base = ["run.plots=false", "log.tensorboard=false", "schedule.warmup_epochs=0", "schedule.name=onecycle"]
    done = run_recipe(tiny_recipe(*base), quiet=True)
    capsys.readouterr()
    with pytest.raises(RunFinished) as finished:
        resume_run(done.run_dir, quiet=True)
    command = str(finished.value).split("to train longer: ")[1].split(" (")[0]
    assert command.startswith("trickbag train ") and "model.weights=" in command and "--resume" not in command
    assert main(command.split()[1:]) == 0
    new_runs = [d for d in done.run_dir.parent.iterdir() if d.is_dir() and d != done.run_dir]
    assert len(new_runs) == 1 and (new_runs[0] / "checkpoints" / "last.pt").is_file()


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


def test_a_wsd_run_resumed_longer_in_its_stable_phase_keeps_its_peak_and_moves_the_decay(tiny_recipe, capsys):
    base = ["log.every_steps=1", "schedule.name=wsd", "schedule.warmup_epochs=0", "schedule.decay_fraction=0.25",
            "schedule.decay_shape=linear", "optim.lr=0.05", "run.plots=false", "log.tensorboard=false"]
    first = run_recipe(tiny_recipe(*base, "train.epochs=4"), plugins=[StopAtEpoch(1)], quiet=True)
    per_epoch = first.history[0]["step"]
    result = resume_run(first.run_dir, ["train.epochs=8"], quiet=False)
    total = int(per_epoch * 8)
    decay = total - round(0.25 * total)  # the new decay's first update
    assert f"the decay now starts at update {decay}" in capsys.readouterr().out
    for step, lr in _lr_per_update(result.run_dir):  # row `step`: the LR after `step` updates
        expected = 0.05 if step < decay else 0.05 * (1 - min(1.0, (step - decay) / (total - decay)))
        assert lr == pytest.approx(expected, rel=1e-5, abs=1e-7), step


def test_schedule_none_keeps_the_optimizers_lr_and_refuses_a_warmup(tiny_recipe):
    from trickbag.train.build import build

    trainer, _ = build(tiny_recipe("schedule.name=none", "schedule.warmup_epochs=0", "optim.lr=0.03"))
    assert trainer.state.scheduler is None
    state = trainer.fit()
    assert [h["lr/group0"] for h in state.history] == [0.03, 0.03]
    with pytest.raises(RecipeError, match="schedule.name=none takes no warm-up"):
        build(tiny_recipe("schedule.name=none", "schedule.warmup_epochs=1"))


def test_a_run_from_before_a_key_existed_resumes_and_a_changed_new_key_is_still_refused(tiny_recipe):
    """Keys added since the run was made (missing from its checkpoints and recipe.yaml) trained with their
    default: resuming is no change; setting one to another value is, unless the key is safe to change."""
    import yaml

    first = run_recipe(tiny_recipe("train.epochs=3", "run.plots=false", "log.tensorboard=false"),
                       plugins=[StopAtEpoch(1)], quiet=True)
    new_keys = [("train", "activation_checkpointing"), ("schedule", "min_lr"), ("tricks", "drop_path")]
    for path in (first.run_dir / "checkpoints").glob("*.pt"):  # as an older trickbag wrote them
        ckpt = torch.load(path, map_location="cpu", weights_only=False)  # noqa: TB403 (our own checkpoint)
        for section, key in new_keys:
            ckpt["recipe"][section].pop(key)
        torch.save(ckpt, path)
    recipe = yaml.safe_load((first.run_dir / "recipe.yaml").read_text())
    for section, key in new_keys:
        recipe[section].pop(key, None)
    (first.run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    with pytest.raises(RecipeError, match="cannot change schedule.min_lr"):
        resume_run(first.run_dir, ["schedule.min_lr=0.001"], quiet=True)
    done = resume_run(first.run_dir, ["train.activation_checkpointing=blocks"], quiet=True)  # safe to change
    assert len(done.history) == 3


#: the flat schedule keys every recipe held before each schedule had its own, at their defaults then
OLD_FLAT_SCHEDULE = {"min_lr": 0.0, "step_epochs": 30.0, "milestones": [0.5, 0.75], "gamma": 0.1, "power": 1.0,
                     "patience": 2, "decay_fraction": 0.2, "decay_shape": "1-sqrt"}


def _as_written_before_the_schedule_registry(run_dir, **inert):
    """Rewrite a run's checkpoints and recipe.yaml with every schedule's flat keys, as trickbag wrote them
    before each schedule had its own keys (``inert``: other values of keys the run's schedule does not take)."""
    import yaml

    for path in (run_dir / "checkpoints").glob("*.pt"):
        ckpt = torch.load(path, map_location="cpu", weights_only=False)  # noqa: TB403 (our own checkpoint)
        ckpt["recipe"]["schedule"] = {**OLD_FLAT_SCHEDULE, **ckpt["recipe"]["schedule"], **inert}
        torch.save(ckpt, path)
    recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    recipe["schedule"] = {**OLD_FLAT_SCHEDULE, **recipe["schedule"], **inert}
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))


def test_a_run_written_with_every_schedules_flat_keys_resumes_longer_and_evaluates(tiny_recipe, capsys):
    """Old runs hold gamma, step_epochs, decay_shape, ... whatever their schedule: resume, a longer resume and
    evaluation of the checkpoint read them (the keys their schedule does not take did nothing), and the
    resumed run trains exactly as the same run never interrupted."""
    from trickbag.train.parts import model_from_checkpoint

    base = ["log.every_steps=1", "schedule.warmup_epochs=1", "run.plots=false", "log.tensorboard=false",
            "schedule.min_lr=0.001"]
    whole = run_recipe(tiny_recipe(*base, "train.epochs=3", "run.name=whole"), quiet=True)
    first = run_recipe(tiny_recipe(*base, "train.epochs=3"), plugins=[StopAtEpoch(1)], quiet=True)
    _as_written_before_the_schedule_registry(first.run_dir, gamma=0.5)  # a cosine run that set gamma: inert
    with pytest.raises(RecipeError, match=r"^schedule.gamma=0.3 does not apply to schedule.name=cosine; gamma is a "
                                          r"key of step, multistep, plateau$"):
        resume_run(first.run_dir, ["schedule.gamma=0.3"], quiet=True)
    done = resume_run(first.run_dir, quiet=True)
    assert _lr_per_update(done.run_dir) == _lr_per_update(whole.run_dir)
    longer = resume_run(first.run_dir, ["train.epochs=5"], quiet=False)
    assert "train.epochs 3 -> 5: the schedule had ended" in capsys.readouterr().out
    assert len(longer.history) == 5
    recipe, model, _, _ = model_from_checkpoint(first.run_dir / "checkpoints" / "best.pt")
    assert recipe.schedule.model_dump() == {"name": "cosine", "warmup_epochs": 1.0, "min_lr": 0.001}
