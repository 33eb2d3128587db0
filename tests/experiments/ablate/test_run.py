"""A real tiny ablation, killed (SIGKILL from its own on_cell callback) after two cells, resumed without
re-running them, with its table recomputed here from the runs' own summary files; the early stop on a
systematic failure; command-line errors."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from trickbag.cli import main

TINY = ["data.name=fake", "data.num_samples=60", "model.name=mlp", "data.batch_size=16", "train.epochs=1",
        "log.tensorboard=false", "run.plots=false"]

#: run_ablation with an on_cell callback that logs what it is given and kills its own process after 2 cells
KILLED_AFTER_TWO = r"""
import json, os, signal, sys
from pathlib import Path
from trickbag.experiments.ablate import run_ablation

out, log = Path(sys.argv[1]), Path(sys.argv[2])
seen = []

def on_cell(name, record):
    saved = json.loads((out / "ablation.json").read_text())["cells"]
    seen.append(name)
    with open(log, "a") as f:
        f.write(json.dumps({"name": name, "status": record["status"], "saved": saved.get(name) == record}) + "\n")
    if len(seen) == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # as an interrupted machine would

run_ablation("digits", "label_smoothing", seeds=2, jobs=1, out=out, overrides=sys.argv[3:], on_cell=on_cell)
"""


def _ablate(args):
    return subprocess.run([sys.executable, "-m", "trickbag", "ablate", *args], capture_output=True, text=True,
                          timeout=600)


def _summary_acc(run_dir):
    m = re.search(r"^test acc\s+([0-9.]+)", (run_dir / "summary.txt").read_text(), re.M)
    return float(m.group(1))


def test_killed_ablation_resumes_and_table_comes_from_the_runs(tmp_path):
    out, log = tmp_path / "abl", tmp_path / "on_cell.jsonl"
    first = subprocess.run([sys.executable, "-c", KILLED_AFTER_TWO, str(out), str(log), *TINY], capture_output=True,
                           text=True, timeout=600)
    assert first.returncode == -9, first.stderr  # SIGKILL, right after the second cell was recorded
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    # on_cell gets each cell once it is saved in ablation.json, in seed-major order
    assert calls == [{"name": "all_s0", "status": "done", "saved": True},
                     {"name": "baseline_s0", "status": "done", "saved": True}]
    saved = json.loads((out / "ablation.json").read_text())
    done = {k: c for k, c in saved["cells"].items() if c["status"] == "done"}
    assert sorted(done) == ["all_s0", "baseline_s0"]  # seed-major order: complete pairs first
    assert not (out / "ablation.md").exists()
    assert not (out / "recipe.yaml").exists()  # the ablation folder is not a run directory
    stamps = {k: (out / c["run_dir"] / "summary.txt").stat().st_mtime_ns for k, c in done.items()}
    # a cell that was running when the machine died left a half-written run directory behind
    (out / "runs" / "all_s1").mkdir(parents=True)
    (out / "runs" / "all_s1" / "recipe.yaml").write_text("half-written")

    second = _ablate([*TINY, "--tricks", "label_smoothing", "--seeds", "2", "--out", str(out), "--jobs", "2"])
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
        assert c["test"]["test/acc"] == c["metric"]
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


def test_command_errors_are_one_line_and_run_nothing(tmp_path, capsys):
    out = tmp_path / "abl"
    assert main(["ablate", *TINY, "--tricks", "nope", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trickbag: error: --tricks: unknown trick 'nope'")
    assert main(["ablate", *TINY, "optim.lrr=1", "--tricks", "ema", "--out", str(out)]) == 2
    assert (
        capsys.readouterr().err.strip() == "trickbag: error: unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)"
    )
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
