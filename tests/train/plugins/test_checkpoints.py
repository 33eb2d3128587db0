"""Checkpoint files of a run: best.pt holds weights only, last.pt everything; every reader of best.pt
works with the lean files and with the full ones older runs wrote; the summary says the sizes."""

from __future__ import annotations

import io
import shutil

import pytest
import torch

from trickbag.recipe import load_recipe
from trickbag.runs.inference import evaluate_run
from trickbag.runs.run import _best_weights, run_recipe
from trickbag.runs.summary import format_bytes
from trickbag.train.checkpoint_files import load_checkpoint
from trickbag.train.parts import model_from_checkpoint
from trickbag.train.plugins.checkpoints import Checkpointing, list_checkpoints

TINY = ["data.name=fake", "data.num_samples=120", "data.batch_size=16", "run.progress=false", "run.plots=false",
        "log.tensorboard=false"]


@pytest.fixture(scope="module")
def ema_run(tmp_path_factory):
    """One epoch with EMA (best.pt and last.pt hold the same update) and SGD momentum."""
    tmp = tmp_path_factory.mktemp("lean")
    recipe = load_recipe("digits", [*TINY, "train.epochs=1", "tricks.ema.enabled=true", "tricks.ema.decay=0.7",
                                    f"run.dir={tmp}", "run.name=ema"])
    out = io.StringIO()
    return run_recipe(recipe, out=out), out.getvalue()


def test_best_pt_holds_what_evaluation_needs_and_last_pt_what_a_resume_needs(ema_run):
    result, _ = ema_run
    best = load_checkpoint(result.run_dir / "checkpoints" / "best.pt")
    last = load_checkpoint(result.run_dir / "checkpoints" / "last.pt")
    assert set(best) == {"format", "weights_only", "model", "counters", "history", "recipe", "classes", "task",
                         "eval_model", "preprocess"}
    assert best["weights_only"] is True and "weights_only" not in last
    assert {"optimizer", "scheduler", "plugins", "rng", "sampler"} <= set(last)
    for key in ("model", "eval_model"):  # the same update: the same weights, raw and averaged
        assert best[key].keys() == last[key].keys()
        for k, v in best[key].items():
            assert torch.equal(v, last[key][k]), (key, k)
    assert best["counters"] == last["counters"] and best["history"] == last["history"]
    assert best["recipe"] == last["recipe"] and best["classes"] == last["classes"]
    # the optimizer state (momentum buffers: one per parameter) is only in last.pt
    assert len(last["optimizer"]["state"]) == sum(1 for _ in model_from_checkpoint(
        result.run_dir / "checkpoints" / "best.pt")[1].parameters())


def test_best_pt_is_about_its_weights_in_size(ema_run):
    result, _ = ema_run
    best, last = (result.run_dir / "checkpoints" / n for n in ("best.pt", "last.pt"))
    ckpt = load_checkpoint(best)
    weights = io.BytesIO()
    torch.save({"model": ckpt["model"], "eval_model": ckpt["eval_model"]}, weights)
    assert best.stat().st_size < weights.tell() + 32_000  # plus the recipe, the history, the counters
    assert best.stat().st_size < last.stat().st_size


def test_the_summary_says_each_checkpoints_size(ema_run):
    result, out = ema_run
    sizes = {n: (result.run_dir / "checkpoints" / n).stat().st_size for n in ("best.pt", "last.pt")}
    assert result.checkpoint_sizes == sizes
    step = result.updates
    line = f"checkpoints best.pt {format_bytes(sizes['best.pt'])} (update {step}), " \
           f"last.pt {format_bytes(sizes['last.pt'])} (update {step})"
    assert line in (result.run_dir / "summary.txt").read_text().splitlines()
    assert line in out.splitlines()


@pytest.mark.parametrize("n,text", [(0, "0 B"), (999, "999 B"), (1_000, "1.0 kB"), (45_120, "45 kB"),
                                    (512_000, "0.5 MB"), (1_250_000, "1.2 MB"), (44_700_000, "45 MB"),
                                    (2_000_000_000, "2.0 GB")])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_resume_never_reads_best_pt(ema_run):
    result, _ = ema_run
    assert [p.name for p in list_checkpoints(result.run_dir / "checkpoints")] == ["last.pt"]


def test_a_trainer_refuses_to_resume_from_a_weights_only_checkpoint(ema_run, tmp_path):
    from trickbag.train.build import build

    result, _ = ema_run
    recipe = load_recipe("digits", [*TINY, "train.epochs=1", "tricks.ema.enabled=true", f"run.dir={tmp_path}"])
    trainer, _ = build(recipe)
    with pytest.raises(ValueError, match="holds weights only .* resume from last.pt"):
        trainer.load_state_dict(load_checkpoint(result.run_dir / "checkpoints" / "best.pt"))


@pytest.fixture(scope="module")
def old_run(ema_run, tmp_path_factory):
    """The run as an older trickbag left it: best.pt a full training checkpoint (what last.pt still is)."""
    result, _ = ema_run
    old = tmp_path_factory.mktemp("old") / "ema"
    shutil.copytree(result.run_dir, old)
    shutil.copyfile(old / "checkpoints" / "last.pt", old / "checkpoints" / "best.pt")
    assert "optimizer" in load_checkpoint(old / "checkpoints" / "best.pt")
    return old


@pytest.mark.parametrize("which", ["lean", "old"])
def test_eval_and_the_runs_test_read_best_pt_in_either_format(ema_run, old_run, which):
    result, _ = ema_run
    run = result.run_dir if which == "lean" else old_run
    ema = load_checkpoint(result.run_dir / "checkpoints" / "last.pt")["plugins"]["ema"]["module"]
    weights = _best_weights(run / "checkpoints" / "best.pt")
    assert weights is not None and all(torch.equal(weights[k], v) for k, v in ema.items())  # the averaged weights
    m = evaluate_run(run, device="cpu")
    assert m["acc"] == pytest.approx(result.test["test/acc"], abs=0) and m["n"] == result.test["test/n"]
    assert m["loss"] == pytest.approx(result.test["test/loss"], rel=1e-6)


@pytest.mark.parametrize("which", ["lean", "old"])
def test_teacher_and_model_weights_read_best_pt_in_either_format(ema_run, old_run, which, tmp_path):
    from trickbag.train.build import build

    result, _ = ema_run
    best = (result.run_dir if which == "lean" else old_run) / "checkpoints" / "best.pt"
    ema = load_checkpoint(result.run_dir / "checkpoints" / "last.pt")["plugins"]["ema"]["module"]
    recipe = load_recipe("digits", [*TINY, "train.epochs=1", f"model.weights={best}", f"run.dir={tmp_path}"])
    trainer, ctx = build(recipe)
    assert ctx.weights_report.ok
    for k, v in trainer.model.state_dict().items():  # model.weights starts from the evaluated (EMA) weights
        assert torch.equal(v, ema[k]), k
    teacher = ctx.load_model(str(best))
    for k, v in teacher.state_dict().items():
        assert torch.equal(v, ema[k]), k


@pytest.mark.parametrize("which", ["lean", "old"])
def test_the_checkpoint_list_reads_the_update_of_best_pt_in_either_format(ema_run, old_run, which):
    result, _ = ema_run
    run = result.run_dir if which == "lean" else old_run
    found = Checkpointing(run / "checkpoints").on_disk()  # a new session: nothing written by it
    assert found == {"best.pt": result.updates, "last.pt": result.updates}


def test_verify_compares_lean_best_pt_files_entry_by_entry(ema_run, tmp_path):
    from trickbag.runs.verify import compare_checkpoints

    result, _ = ema_run
    best = result.run_dir / "checkpoints" / "best.pt"
    n, diffs = compare_checkpoints(best, best)
    ckpt = load_checkpoint(best)
    assert diffs == [] and n == len(ckpt["model"]) + len(ckpt["eval_model"])
    changed = dict(ckpt)
    changed["eval_model"] = {k: v.clone() for k, v in ckpt["eval_model"].items()}
    key = next(k for k, v in changed["eval_model"].items() if v.is_floating_point())
    changed["eval_model"][key] += 1
    torch.save(changed, tmp_path / "best.pt")
    _, diffs = compare_checkpoints(best, tmp_path / "best.pt")
    assert [d.where for d in diffs] == [f"best.pt eval_model/{key}"]
