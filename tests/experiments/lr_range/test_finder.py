"""`trickbag lr-find` on the run path: the recipe's precision applies inside the test, the LR of every
update is the finder's (after the schedule's step, per-group ratios kept), the run stops after `steps`
updates without evaluating, the files land in ./lr-find-<recipe>, and the command line."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from trickbag.cli import main
from trickbag.experiments.lr_range import lr_find_recipe
from trickbag.plugin.interface import Plugin

TINY = ["data.name=fake", "data.num_samples=64", "model.name=mlp", "data.batch_size=16", "log.tensorboard=false"]


class _Recorder(Plugin):
    """Watches the run the finder drives: forward calls, each update's LRs, evaluations."""

    def __init__(self) -> None:
        self.forwards: list[tuple[bool, torch.dtype, torch.dtype]] = []
        self.update_lrs: list[list[float]] = []
        self.updates = self.evals = 0
        self.final_step = None

    def on_fit_start(self, state):
        def hook(module, inputs, output):
            if module.training:  # training forwards (the finder evaluates nothing)
                self.forwards.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), output.dtype))

        state.model.register_forward_hook(hook)

    def on_after_backward(self, state):
        if not state.closure_pass:
            self.update_lrs.append(state.lrs())  # what optimizer.step() is about to use

    def on_step(self, state):
        self.updates += 1

    def on_eval_start(self, state):
        self.evals += 1

    def on_fit_end(self, state):
        self.final_step = state.step


@pytest.mark.parametrize("precision", ["bf16", "32"])
def test_the_recipes_precision_applies_during_the_range_test(tmp_path, precision):
    rec = _Recorder()
    res, _ = lr_find_recipe("digits", [*TINY, f"train.precision={precision}"], steps=8, start=1e-4, end=1e-2,
                            out=tmp_path / "lrf", plugins=[rec])
    assert len(res.lrs) == 8 and len(rec.forwards) == 8
    if precision == "bf16":
        assert all(on and dtype == torch.bfloat16 and out == torch.bfloat16 for on, dtype, out in rec.forwards)
    else:
        assert not any(on for on, _, _ in rec.forwards) and all(out == torch.float32 for _, _, out in rec.forwards)


def test_each_update_uses_the_finders_lr_with_group_ratios_and_the_run_stops_at_steps(tmp_path):
    # two LR groups: net.1.* at 10x the rest (bases 0.5 / 0.05); digits has warmup + cosine, which the
    # finder must override at every update; 12 updates need more epochs than the recipe's one
    rec = _Recorder()
    overrides = [*TINY, "train.epochs=1", "tricks.param_groups.enabled=true",
                 "tricks.param_groups.lr_scale={'net.1.*': 10}"]
    steps, start, end = 12, 1e-4, 1e-2
    res, _ = lr_find_recipe("digits", overrides, steps=steps, start=start, end=end, out=tmp_path / "lrf",
                            plugins=[rec])
    expected = start * (end / start) ** (np.arange(steps) / (steps - 1))
    np.testing.assert_allclose(res.lrs, expected, rtol=1e-12)
    assert res.stop_reason is None and rec.updates == rec.final_step == steps and rec.evals == 0
    got = np.array(rec.update_lrs)
    assert got.shape == (steps, 4)
    np.testing.assert_allclose(got, expected[:, None] * np.array([1.0, 1.0, 0.1, 0.1]), rtol=1e-12)


def test_default_output_folder_is_in_the_current_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["lr-find", *TINY, f"run.dir={tmp_path / 'runs'}", "--steps", "5"]) == 0
    assert "written: lr-find-digits/lr_find.png, lr-find-digits/lr_find.csv" in capsys.readouterr().out
    assert (tmp_path / "lr-find-digits" / "lr_find.csv").is_file()
    assert not (tmp_path / "runs").exists()  # no run directory, nothing under run.dir


def test_command_writes_plot_and_csv_and_names_the_rule(tmp_path, capsys):
    out = tmp_path / "lrf"
    rc = main(["lr-find", *TINY, "--steps", "25", "--start", "1e-4", "--end", "10", "--rule", "min10",
               "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "rule: lr at the minimum of the smoothed loss / 10" in text
    assert (out / "lr_find.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(out / "lr_find.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    lrs = np.array([float(r["lr"]) for r in rows])
    np.testing.assert_allclose(lrs, 1e-4 * (1e5) ** (np.arange(len(lrs)) / 24), rtol=1e-9)
    smoothed = np.array([float(r["smoothed"]) for r in rows])
    finite = np.isfinite(smoothed)
    best = lrs[finite][np.argmin(smoothed[finite])]
    suggested = float(text.split("suggested lr ")[1].split()[0])
    assert suggested == pytest.approx(best / 10, rel=5e-3)  # printed with 3 significant digits


def test_command_errors_are_one_line(tmp_path, capsys):
    assert main(["lr-find", *TINY, "--start", "1", "--end", "0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trickbag: error: --start must be below --end")
    assert main(["lr-find", "optim.lrr=0.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["trickbag: error: unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)"]
    (tmp_path / "file").write_text("x")
    assert main(["lr-find", *TINY, "--out", str(tmp_path / "file")]) == 2
    assert "is a file; give a folder" in capsys.readouterr().err


def _steepest_region(lrs, losses):
    """The plot's steepest-descent region, read independently of the rules: the raw losses averaged over a
    window of +-5 % of the points, their slope against log10(lr) before the minimum, and the LRs where it
    falls at least half as fast as at its steepest."""
    x, y = np.log10(np.asarray(lrs)), np.asarray(losses, dtype=float)
    w = max(2, len(y) // 20)
    ys = np.array([y[max(0, i - w): i + w + 1].mean() for i in range(len(y))])
    i_min = int(np.argmin(ys))
    g = np.gradient(ys[: i_min + 1], x[: i_min + 1])
    k = lo = hi = int(np.argmin(g))
    while lo > 0 and g[lo - 1] <= 0.5 * g[k]:
        lo -= 1
    while hi < i_min and g[hi + 1] <= 0.5 * g[k]:
        hi += 1
    return lrs[lo], lrs[hi]


@pytest.mark.parametrize("recipe, overrides", [
    ("digits", []),
    ("tabular", ["data.label_column=target"]),  # breast cancer: the first steps' noise once gave 1e-06
])
def test_the_default_suggestion_lands_within_10x_of_the_plots_steepest_descent(tmp_path, recipe, overrides):
    from sklearn import datasets

    if recipe == "tabular":
        datasets.load_breast_cancer(as_frame=True).frame.to_csv(tmp_path / "bc.csv", index=False)
        overrides = [*overrides, f"data.root={tmp_path / 'bc.csv'}"]
    res, _ = lr_find_recipe(recipe, overrides, steps=200, out=tmp_path / "out")
    lo, hi = _steepest_region(res.lrs, res.losses)
    assert res.rule == "valley" and lo / 10 <= res.suggestion <= hi * 10, (res.suggestion, lo, hi)
    assert res.warning is None
