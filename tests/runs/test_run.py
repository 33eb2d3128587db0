"""The run directory: what a tiny run writes, refusal to overwrite, resume from the directory alone."""

from __future__ import annotations

import csv
import io
import shutil

import pytest
import torch
import yaml
from PIL import Image

from trickbag.errors import CheckpointError, TrickbagError
from trickbag.recipe import load_recipe, recipe_from_dict
from trickbag.runs.inference import evaluate_run
from trickbag.runs.run import resume_run, run_recipe
from trickbag.train.checkpoint_files import load_checkpoint

TINY = ["data.name=fake", "data.num_samples=120", "data.batch_size=16", "train.epochs=2", "run.progress=false",
        "log.every_steps=2"]


def tiny(tmp_path, *extra: str, name: str = "a"):
    return load_recipe("digits", [*TINY, f"run.dir={tmp_path}", f"run.name={name}", *extra])


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """One tiny run with every writer on (TensorBoard, plots), shared by the checks below."""
    tmp = tmp_path_factory.mktemp("runs")
    recipe = tiny(tmp)
    out = io.StringIO()
    result = run_recipe(recipe, out=out)
    return recipe, result, out.getvalue()


def test_run_directory_holds_every_artifact(full_run):
    recipe, result, printed = full_run
    d = result.run_dir
    for rel in ("recipe.yaml", "metrics.csv", "checkpoints/last.pt", "checkpoints/best.pt", "curves.png", "lr.png",
                "summary.txt"):
        assert (d / rel).is_file() and (d / rel).stat().st_size > 0, rel
    assert list((d / "tb").glob("events.out.tfevents.*"))
    assert not list(d.rglob("*.tmp"))
    assert str(d) in printed


def test_saved_recipe_is_the_resolved_recipe(full_run):
    recipe, result, _ = full_run
    saved = yaml.safe_load((result.run_dir / "recipe.yaml").read_text())
    assert recipe_from_dict(saved) == recipe
    assert saved["train"]["epochs"] == 2 and saved["optim"]["lr"] == recipe.optim.lr  # defaults written out


def test_metrics_csv_has_one_row_per_epoch_matching_the_history(full_run):
    _, result, _ = full_run
    rows = list(csv.DictReader((result.run_dir / "metrics.csv").open()))
    epoch_rows = [r for r in rows if r.get("train/loss")]
    assert len(epoch_rows) == 2 == len(result.history)
    for row, h in zip(epoch_rows, result.history):
        assert int(row["epoch"]) == h["epoch"] and int(row["step"]) == h["step"]
        for key in ("train/loss", "train/acc", "val/loss", "val/acc", "lr/group0", "train/samples_per_s"):
            assert float(row[key]) == pytest.approx(h[key], rel=1e-5)
        assert h["train/samples_per_s"] > 0
    step_rows = [r for r in rows if r.get("train/step_loss")]
    assert [int(r["step"]) for r in step_rows] == list(range(2, int(result.history[-1]["step"]) + 1, 2))


def test_tensorboard_events_hold_the_epoch_metrics(full_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, result, _ = full_run
    acc = EventAccumulator(str(result.run_dir / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/loss", "val/acc", "train/step_loss", "lr/group0"} <= set(tags)
    val = [e.value for e in acc.Scalars("val/acc")]
    assert val == pytest.approx([h["val/acc"] for h in result.history], rel=1e-6)


def test_plots_are_pngs(full_run):
    _, result, _ = full_run
    for name in ("curves.png", "lr.png"):
        with Image.open(result.run_dir / name) as im:
            assert im.format == "PNG" and im.size[0] > 100


def test_summary_and_checkpoints_agree_with_the_result(full_run):
    recipe, result, _ = full_run
    summary = (result.run_dir / "summary.txt").read_text()
    assert f"test acc   {result.test['test/acc']:.4f}" in summary
    n_params = sum(v.numel() for k, v in load_checkpoint(result.run_dir / "checkpoints/last.pt")["model"].items()
                   if "running" not in k and "num_batches" not in k)
    assert f"{n_params:,}" in summary  # torchinfo's parameter count
    last = load_checkpoint(result.run_dir / "checkpoints/last.pt")
    assert last["recipe"] == recipe.model_dump(mode="json")
    assert last["counters"]["epoch"] == 2 and last["counters"]["step"] == result.history[-1]["step"]
    assert {"model", "optimizer", "scheduler", "rng", "plugins", "history"} <= set(last)
    # best.pt is the epoch with the best val/acc
    best = load_checkpoint(result.run_dir / "checkpoints/best.pt")
    vals = [h["val/acc"] for h in result.history]
    assert best["counters"]["epoch"] == vals.index(max(vals)) + 1
    # evaluate_run reproduces the test metrics from best.pt
    m = evaluate_run(result.run_dir, device="cpu")
    assert m["acc"] == pytest.approx(result.test["test/acc"]) and m["n"] == result.test["test/n"]


def test_an_existing_run_directory_is_refused_and_left_alone(full_run):
    recipe, result, _ = full_run
    before = {p: p.stat().st_mtime_ns for p in result.run_dir.rglob("*") if p.is_file()}
    with pytest.raises(TrickbagError, match="already exists.*--resume"):
        run_recipe(recipe, out=io.StringIO())
    assert {p: p.stat().st_mtime_ns for p in result.run_dir.rglob("*") if p.is_file()} == before


def test_a_bad_recipe_creates_no_run_directory(tmp_path):
    recipe = tiny(tmp_path, "train.monitor=val/acc", "data.val_fraction=0")
    with pytest.raises(TrickbagError, match="val_fraction"):
        run_recipe(recipe, out=io.StringIO())
    assert not (tmp_path / "a").exists()


def test_resume_from_a_mid_epoch_checkpoint_finishes_like_the_uninterrupted_run(tmp_path):
    """Copy a finished run, keep only its checkpoints up to a mid-epoch step-N.pt, resume: same weights."""
    extra = ["train.checkpoint_every_steps=2", "train.keep_checkpoints=100", "log.tensorboard=false",
             "run.plots=false", "train.deterministic=true"]
    a = run_recipe(tiny(tmp_path, *extra, name="a"), quiet=True)
    final_a = load_checkpoint(a.run_dir / "checkpoints/last.pt")
    steps_per_epoch = int(a.history[0]["step"])
    resume_step = 4
    assert resume_step % steps_per_epoch != 0  # inside an epoch

    b_dir = tmp_path / "b"
    shutil.copytree(a.run_dir, b_dir)
    for p in (b_dir / "checkpoints").iterdir():
        if p.name.startswith("step-") and int(p.stem.split("-")[1]) > resume_step or p.name == "last.pt":
            p.unlink()
    assert (b_dir / "checkpoints" / f"step-{resume_step:08d}.pt").exists()
    b = resume_run(b_dir, quiet=True)
    final_b = load_checkpoint(b_dir / "checkpoints/last.pt")
    for k, v in final_a["model"].items():
        assert torch.equal(v, final_b["model"][k]), k
    assert final_b["counters"] == final_a["counters"]
    keys = ("train/loss", "val/acc", "lr/group0", "step")
    assert [{k: h[k] for k in keys} for h in b.history] == [{k: h[k] for k in keys} for h in a.history]
    # metrics.csv continues without duplicate or missing epoch rows
    rows_a = [r for r in csv.DictReader((a.run_dir / "metrics.csv").open()) if r.get("train/loss")]
    rows_b = [r for r in csv.DictReader((b_dir / "metrics.csv").open()) if r.get("train/loss")]
    assert [(r["epoch"], r["step"], r["train/loss"]) for r in rows_b] == [
        (r["epoch"], r["step"], r["train/loss"]) for r in rows_a]


def test_resume_of_a_directory_without_checkpoints_is_one_clear_error(tmp_path):
    with pytest.raises(TrickbagError, match="no such run directory"):
        resume_run(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrickbagError, match="not a trickbag run directory"):
        resume_run(tmp_path / "empty")


def test_evaluate_run_without_best_checkpoint(tmp_path):
    (tmp_path / "r").mkdir()
    with pytest.raises(CheckpointError, match="best.pt"):
        evaluate_run(tmp_path / "r")


def test_recipe_early_stopping_stops_and_reports_the_reason(tmp_path):
    """Monitor the learning rate, which a cosine schedule lowers after warmup: with patience 1 the run
    stops one epoch after the peak, and best.pt is the peak epoch."""
    recipe = tiny(
        tmp_path,
        "train.epochs=5",
        "train.early_stopping_patience=1",
        "train.monitor=lr/group0",
        "train.mode=max",
        "schedule.name=cosine",
        "schedule.warmup_epochs=1",
        "log.tensorboard=false",
        "run.plots=false",
    )
    result = run_recipe(recipe, quiet=True)
    lrs = [h["lr/group0"] for h in result.history]
    assert lrs[1] < lrs[0]  # the schedule's shape the test relies on
    assert len(result.history) == 2
    assert result.stop_message.startswith("early stopping: lr/group0 did not improve for 1 evaluations")
    assert f"stopped    {result.stop_message}" in (result.run_dir / "summary.txt").read_text()
    assert load_checkpoint(result.run_dir / "checkpoints/best.pt")["counters"]["epoch"] == 1
    assert result.best == pytest.approx(lrs[0])


def test_a_run_without_a_checkpoint_yet_resumes_from_the_beginning(tmp_path, capsys):
    """Killed before its first checkpoint, a run is no dead end: --resume trains it from the start with its
    recipe, and ends like an uninterrupted run of the same recipe."""
    ref = run_recipe(tiny(tmp_path, name="ref"), quiet=True)
    d = tmp_path / "early"
    d.mkdir()
    (d / "recipe.yaml").write_text((ref.run_dir / "recipe.yaml").read_text().replace("name: ref", "name: early"))
    result = resume_run(d, quiet=True)
    assert len(result.history) == 2 and result.updates == ref.updates
    a, b = load_checkpoint(ref.run_dir / "checkpoints" / "last.pt"), load_checkpoint(d / "checkpoints" / "last.pt")
    for k, v in a["model"].items():
        assert torch.equal(v, b["model"][k]), k


def test_a_run_of_the_default_recipe_on_other_data_is_named_after_the_data(tmp_path, capsys):
    import numpy as np
    from PIL import Image

    from trickbag.cli import main

    pets = tmp_path / "pets"
    rng = np.random.default_rng(0)
    for cls, base in (("cat", 40), ("dog", 210)):
        (pets / cls).mkdir(parents=True)
        for i in range(6):
            img = np.clip(base + rng.normal(0, 20, (12, 12)), 0, 255).astype(np.uint8)
            Image.fromarray(img, mode="L").convert("RGB").save(pets / cls / f"{i}.png")
    (tmp_path / "my wine.csv").write_text("a,b,label\n" + "".join(f"{i % 7},{i % 3},{i % 2}\n" for i in range(40)))
    quiet = ["run.progress=false", "run.plots=false", "log.tensorboard=false", "train.epochs=1", "--quiet"]
    runs = tmp_path / "runs"
    assert main(["train", "data.name=imagefolder", f"data.root={pets}", "data.image_size=12", f"run.dir={runs}",
                 *quiet]) == 0
    assert main(["train", "data.name=csv", f"data.root={tmp_path / 'my wine.csv'}", "data.label_column=label",
                 f"run.dir={runs}", *quiet]) == 0
    assert main(["train", "digits", "data.name=fake", f"run.dir={runs}", *quiet]) == 0  # a recipe named: its name
    names = sorted(p.name.rsplit("-", 2)[0] for p in runs.iterdir())
    assert names == ["digits", "my_wine", "pets"], names


def test_a_corrupt_sample_is_found_before_the_run_folder_and_left_out_when_allowed(tmp_path, capsys):
    import numpy as np
    from PIL import Image

    from trickbag.cli import main

    pets, rng = tmp_path / "pets", np.random.default_rng(0)
    for cls, base in (("cat", 40), ("dog", 210)):
        (pets / cls).mkdir(parents=True)
        for i in range(20):
            img = np.clip(base + rng.normal(0, 20, (12, 12)), 0, 255).astype(np.uint8)
            Image.fromarray(img, mode="L").convert("RGB").save(pets / cls / f"{i}.png")
    good = (pets / "dog" / "7.png").read_bytes()
    (pets / "dog" / "7.png").write_bytes(good[:40])  # a truncated file: its header reads, its pixels do not
    args = ["train", "data.name=imagefolder", f"data.root={pets}", "data.image_size=12", f"run.dir={tmp_path}",
            "run.name=x", "train.epochs=2", "data.batch_size=4", "run.progress=false", "run.plots=false",
            "log.tensorboard=false", "--quiet"]
    capsys.readouterr()
    assert main(args) == 2  # 1 of 40 files: above data.max_corrupt's default share (1 %)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'dog/7.png'" in err and "data.max_corrupt=0.025" in err, err
    assert not (tmp_path / "x").exists()  # found before anything was written
    assert main([*args, "data.max_corrupt=0.05"]) == 0  # allowed: left out and listed
    assert (tmp_path / "x" / "skipped_images.txt").read_text().startswith("dog/7.png\t")
    assert (tmp_path / "x" / "summary.txt").is_file()


def test_a_recipe_plugin_with_build_time_seams_is_set_up(tiny_recipe, tmp_path, monkeypatch):
    """``train.plugins`` naming a plug-in that overrides ``configure``/``after_optimizer``: both run, between them
    the optimizer is built, and the loss it sets is the one the run trains with."""
    (tmp_path / "my_seams.py").write_text(
        "import torch\n"
        "from trickbag.plugin.interface import Plugin\n"
        "class Seams(Plugin):\n"
        "    calls = []\n"
        "    def configure(self, ctx):\n"
        "        Seams.calls.append(('configure', ctx.optimizer is None))\n"
        "        ctx.loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.3)\n"
        "    def after_optimizer(self, ctx):\n"
        "        Seams.calls.append(('after_optimizer', ctx.optimizer is not None))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from trickbag.train.build import build

    trainer, _ = build(tiny_recipe("train.plugins=[my_seams:Seams]"))
    import my_seams

    assert my_seams.Seams.calls == [("configure", True), ("after_optimizer", True)]
    assert isinstance(trainer.state.loss_fn, torch.nn.CrossEntropyLoss) and trainer.state.loss_fn.label_smoothing == 0.3
