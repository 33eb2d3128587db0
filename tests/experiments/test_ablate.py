"""Ablations: trick parsing and variants checked through the resolved recipes, the table against scipy,
and a real tiny ablation that is killed after two cells, resumed without re-running them, and whose
table is recomputed here from the runs' own summary files."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from trickbag.cli import main
from trickbag.config import load_recipe
from trickbag.experiments import ExperimentError
from trickbag.experiments.ablate import (
    KILL_ENV,
    ablation_rows,
    ablation_variants,
    cell_name,
    format_table,
    parse_tricks,
)

TINY = ["data.name=fake", "data.num_samples=60", "model.name=mlp", "data.batch_size=16", "train.epochs=1",
        "log.tensorboard=false", "run.plots=false"]


# --------------------------------------------------------------------------- tricks and variants
def _switches(recipe):
    return {
        "label_smoothing": recipe.tricks.label_smoothing.enabled,
        "ema": recipe.tricks.ema.enabled,
        "data.augment": recipe.data.augment,
        "mixup": recipe.tricks.mix.enabled and recipe.tricks.mix.cutmix_alpha == 0,
    }


@pytest.mark.parametrize("mode", ["leave-one-out", "add-one"])
def test_variants_switch_exactly_the_intended_tricks(mode):
    names = ["label_smoothing", "ema", "data.augment", "mixup"]
    variants, ref = ablation_variants(parse_tricks(",".join(names)), mode)
    # start from a recipe with everything on, so "off" must really be written
    base = ["tricks.label_smoothing.enabled=true", "tricks.ema.enabled=true", "data.augment=true",
            "tricks.mix.enabled=true"]
    expected = {}
    if mode == "leave-one-out":
        assert ref == "all"
        expected["all"] = set(names)
        expected.update({f"-{n}": set(names) - {n} for n in names})
        expected["baseline"] = set()
    else:
        assert ref == "baseline"
        expected["baseline"] = set()
        expected.update({f"+{n}": {n} for n in names})
    assert [v.name for v in variants] == list(expected)
    for v in variants:
        on = {k for k, val in _switches(load_recipe("digits", [*base, *v.overrides])).items() if val}
        assert on == expected[v.name], v.name
        assert set(v.enabled) == expected[v.name]
    assert len({v.slug for v in variants}) == len(variants) and not any(v.slug.startswith("-") for v in variants)


def test_one_trick_leave_one_out_has_no_duplicate_variant():
    variants, ref = ablation_variants(parse_tricks("label_smoothing"), "leave-one-out")
    assert [v.name for v in variants] == ["all", "baseline"] and ref == "all"


@pytest.mark.parametrize("spec, msg", [
    ("label_smothing", "unknown trick 'label_smothing' (did you mean 'label_smoothing'?)"),
    ("optim.lr", "'optim.lr' is not a true/false recipe key"),
    ("data.augmnt", "(did you mean 'data.augment'?)"),
    ("ema,ema", "names ema more than once"),
    ("mixup,cutmix", "'mixup' and 'cutmix' switch the same recipe key (tricks.mix.enabled)"),
    (" , ", "--tricks is empty"),
])
def test_bad_tricks_are_one_clear_line(spec, msg):
    with pytest.raises(ExperimentError) as e:
        parse_tricks(spec)
    assert msg in str(e.value) and "\n" not in str(e.value)


# --------------------------------------------------------------------------- the table
def test_rows_match_scipy_and_pair_only_common_seeds():
    variants, ref = ablation_variants(parse_tricks("label_smoothing,ema"), "leave-one-out")
    rng = np.random.default_rng(0)
    seeds = [0, 1, 2, 3]
    noise = rng.normal(0.9, 0.03, size=len(seeds))
    effect = {"all": 0.0, "-label_smoothing": -0.02, "-ema": 0.001, "baseline": -0.03}
    cells = {}
    for v in variants:
        for i, s in enumerate(seeds):
            cells[cell_name(v, s)] = {"status": "done", "metric": float(noise[i] + effect[v.name] + rng.normal(0, 0.002)),
                                      "wall_time_s": 2.0 + (v.name == "all") + 0.1 * i, "peak_rss_mb": 100.0 + i}
    cells[cell_name(variants[2], 3)] = {"status": "failed", "message": "boom"}  # -ema lost seed 3
    rows = {r["variant"]: r for r in ablation_rows(variants, seeds, cells, ref)}
    ref_vals = np.array([cells[cell_name(variants[0], s)]["metric"] for s in seeds])
    ref_time = np.mean([cells[cell_name(variants[0], s)]["wall_time_s"] for s in seeds])
    for v in variants:
        ok = [s for s in seeds if cells[cell_name(v, s)]["status"] == "done"]
        vals = np.array([cells[cell_name(v, s)]["metric"] for s in ok])
        r = rows[v.name]
        assert r["seeds"] == len(ok)
        assert r["mean"] == pytest.approx(vals.mean()) and r["sd"] == pytest.approx(vals.std(ddof=1))
        times = [cells[cell_name(v, s)]["wall_time_s"] for s in ok]
        assert r["time_ratio"] == pytest.approx(np.mean(times) / ref_time)
        assert r["peak_mb"] == max(cells[cell_name(v, s)]["peak_rss_mb"] for s in ok)
        if v.name == "all":
            assert r["delta"] is None
            continue
        test = stats.ttest_rel(vals, ref_vals[[seeds.index(s) for s in ok]])
        ci = test.confidence_interval(0.95)
        assert r["delta"] == pytest.approx(float(np.mean(vals - ref_vals[[seeds.index(s) for s in ok]])))
        assert (r["ci_low"], r["ci_high"]) == pytest.approx((ci.low, ci.high))
        assert r["distinguishable"] == bool(test.pvalue < 0.05)
    assert rows["baseline"]["distinguishable"] and rows["-label_smoothing"]["distinguishable"]
    assert not rows["-ema"]["distinguishable"]
    table = format_table(list(rows.values()), "test/acc", "all")
    marked = {line.split("|")[1].strip() for line in table.splitlines() if line.startswith("|") and " *" in line}
    assert marked == {"-label_smoothing", "baseline"}


# --------------------------------------------------------------------------- a real ablation, killed and resumed
def _ablate(args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "trickbag", "ablate", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def _summary_acc(run_dir):
    m = re.search(r"^test acc\s+([0-9.]+)", (run_dir / "summary.txt").read_text(), re.M)
    return float(m.group(1))


def test_killed_ablation_resumes_and_table_comes_from_the_runs(tmp_path):
    out = tmp_path / "abl"
    args = [*TINY, "--tricks", "label_smoothing", "--seeds", "2", "--out", str(out)]
    first = _ablate([*args, "--jobs", "1"], {KILL_ENV: "2"})
    assert first.returncode == -9, first.stderr  # SIGKILL, right after the second cell was recorded
    saved = json.loads((out / "ablation.json").read_text())
    done = {k: c for k, c in saved["cells"].items() if c["status"] == "done"}
    assert sorted(done) == ["all_s0", "baseline_s0"]  # seed-major order: complete pairs first
    assert not (out / "ablation.md").exists()
    stamps = {k: (out / c["run_dir"] / "summary.txt").stat().st_mtime_ns for k, c in done.items()}
    # a cell that was running when the machine died left a half-written run directory behind
    (out / "runs" / "all_s1").mkdir(parents=True)
    (out / "runs" / "all_s1" / "recipe.yaml").write_text("half-written")

    second = _ablate([*args, "--jobs", "2"])
    assert second.returncode == 0, second.stderr
    assert "4 cells; 2 already done" in second.stderr and "2 to run with 2 jobs" in second.stderr
    assert re.search(r"\[4/4\] .* ETA", second.stderr)
    cells = json.loads((out / "ablation.json").read_text())["cells"]
    assert sorted(k for k, c in cells.items() if c["status"] == "done") == ["all_s0", "all_s1", "baseline_s0",
                                                                           "baseline_s1"]
    for k in done:  # finished cells were not run again
        assert cells[k] == done[k]
        assert (out / done[k]["run_dir"] / "summary.txt").stat().st_mtime_ns == stamps[k]
    assert cells["all_s1"]["pid"] != cells["baseline_s1"]["pid"] != done["all_s0"]["pid"]
    assert all(c["peak_rss_mb"] > 10 and c["wall_time_s"] > 0 for c in cells.values())

    # the table, recomputed from each run directory's own summary.txt
    acc = {k: _summary_acc(out / "runs" / k) for k in cells}
    for k, c in cells.items():
        assert c["metric"] == pytest.approx(acc[k], abs=5e-5)
    with open(out / "ablation.csv", newline="") as f:
        rows = {r["variant"]: r for r in csv.DictReader(f)}
    ref = np.array([acc["all_s0"], acc["all_s1"]])
    base = np.array([acc["baseline_s0"], acc["baseline_s1"]])
    assert float(rows["all"]["mean"]) == pytest.approx(ref.mean(), abs=1e-4)
    assert float(rows["all"]["sd"]) == pytest.approx(ref.std(ddof=1), abs=1e-4)
    assert float(rows["baseline"]["mean"]) == pytest.approx(base.mean(), abs=1e-4)
    assert float(rows["baseline"]["delta"]) == pytest.approx((base - ref).mean(), abs=1e-4)
    d = base - ref
    if np.std(d, ddof=1) > 0:
        ci = stats.ttest_rel(base, ref).confidence_interval(0.95)
        assert (float(rows["baseline"]["ci_low"]), float(rows["baseline"]["ci_high"])) == pytest.approx(
            (ci.low, ci.high), abs=1e-3)
    assert rows["baseline"]["tricks_on"] == "—" and rows["all"]["tricks_on"] == "label_smoothing"
    times = [cells[k]["wall_time_s"] for k in ("all_s0", "all_s1")]
    assert float(rows["all"]["time_s"]) == pytest.approx(np.mean(times))
    md = (out / "ablation.md").read_text()
    assert md.splitlines()[0] in second.stdout
    exact = np.array([cells["all_s0"]["metric"], cells["all_s1"]["metric"]])
    assert f"{exact.mean():.4f} ± {exact.std(ddof=1):.4f}" in md
    assert (out / "ablation.png").read_bytes()[:4] == b"\x89PNG"


def test_systematic_failure_stops_early_and_is_reported_in_one_line(tmp_path, capsys):
    """Every cell would fail the same way (data file missing): stop after two, not after all six."""
    out = tmp_path / "abl"
    args = ["ablate", "data.name=csv", f"data.root={tmp_path / 'missing.csv'}", "model.name=mlp",
            "log.tensorboard=false", "--tricks", "ema", "--seeds", "3", "--out", str(out)]
    assert main(args) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert "stopping: the first cells of this run all failed" in captured.err
    assert err[-1].startswith("trickbag: error: 2 cell(s) failed (all_s0, baseline_s0): ")
    assert "missing.csv" in err[-1] and "trickbag: error: trickbag: error" not in err[-1]
    cells = json.loads((out / "ablation.json").read_text())["cells"]
    assert sorted(cells) == ["all_s0", "baseline_s0"] and all(c["status"] == "failed" for c in cells.values())
    assert "| all " in captured.out and "—" in captured.out  # the (empty) table is still written


# --------------------------------------------------------------------------- command-line errors
def test_command_errors_are_one_line_and_run_nothing(tmp_path, capsys):
    out = tmp_path / "abl"
    assert main(["ablate", *TINY, "--tricks", "nope", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trickbag: error: --tricks: unknown trick 'nope'")
    assert main(["ablate", *TINY, "optim.lrr=1", "--tricks", "ema", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == "trickbag: error: unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)"
    assert not out.exists()
    with pytest.raises(SystemExit) as e:  # argparse's own check, one line as well
        main(["ablate", *TINY, "--tricks", "ema", "--seeds", "0"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument --seeds: must be >= 1, got 0" in err[0]
    # a folder started with other settings is not silently mixed with this ablation
    out.mkdir()
    (out / "ablation.json").write_text(json.dumps({"settings": {"recipe": {}, "tricks": ["ema"], "mode": "add-one",
                                                                "metric": "test/acc"}, "cells": {}}))
    assert main(["ablate", *TINY, "--tricks", "ema", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was started with different settings (recipe, mode differ)" in err[0]


def test_cli_import_stays_light():
    code = ("import sys, trickbag.cli; p = trickbag.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'optuna', 'scipy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    helps = subprocess.run([sys.executable, "-m", "trickbag", "--help"], capture_output=True, text=True).stdout
    for cmd in ("ablate", "sweep", "lr-find", "report"):
        assert cmd in helps
