"""`trickbag report` on two tiny real runs: only differing recipe keys, numbers read back from the runs,
one curves PNG, a self-contained HTML page, and folders that are not runs skipped with a note."""

from __future__ import annotations

import base64
import csv
import re

import pytest

from trickbag.cli import main
from trickbag.experiments import ExperimentError
from trickbag.experiments.report import compare_runs, read_run
from trickbag.recipe import load_recipe
from trickbag.runs.run import run_recipe

TINY = ["data.name=fake", "data.num_samples=64", "model.name=mlp", "data.batch_size=16", "train.epochs=2",
        "log.tensorboard=false", "run.plots=false", "run.progress=false"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    results = {}
    for name, lr in (("slow", 0.01), ("fast", 0.2)):
        recipe = load_recipe("digits", [*TINY, f"optim.lr={lr}", f"run.dir={root}", f"run.name={name}"])
        results[name] = run_recipe(recipe, quiet=True)
    return root, results


def _epoch_rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("train/loss")]


def test_report_table_plot_and_html(two_runs, tmp_path, capsys):
    root, results = two_runs
    out = tmp_path / "rep"
    assert main(["report", str(root / "slow"), str(root / "fast"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    table = (out / "table.md").read_text()
    assert table.strip() in printed
    header = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    # only the key that differs (run.name differs too, but names the run and is left out)
    assert header[:2] == ["run", "optim.lr"] and "run.name" not in header
    with open(out / "table.csv", newline="") as f:
        rows = {r["run"]: r for r in csv.DictReader(f)}
    for name, lr in (("slow", 0.01), ("fast", 0.2)):
        row, res = rows[name], results[name]
        assert float(row["optim.lr"]) == lr
        epochs = _epoch_rows(root / name)
        assert int(row["epochs"]) == len(epochs) == 2
        assert float(row["best val/acc"]) == pytest.approx(max(float(e["val/acc"]) for e in epochs))
        assert float(row["best val/loss"]) == pytest.approx(min(float(e["val/loss"]) for e in epochs))
        assert float(row["final train/loss"]) == pytest.approx(float(epochs[-1]["train/loss"]))
        assert float(row["test acc"]) == pytest.approx(res.test["test/acc"], abs=5e-5)  # summary keeps 4 digits
        assert float(row["time (s)"]) == pytest.approx(res.wall_time_s, abs=0.051)
    png = (out / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()
    embedded = re.search(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert embedded and base64.b64decode(embedded.group(1)) == png
    assert not re.search(r"(src|href)=['\"]?(https?:|file:|/)", page)  # nothing to fetch: one file
    assert "<td>slow</td><td>0.01</td>" in page


def test_compare_runs_keeps_missing_keys_and_unfinished_runs(two_runs, tmp_path):
    root, _ = two_runs
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "recipe.yaml").write_text((root / "slow" / "recipe.yaml").read_text().replace("lr: 0.01", "lr: 0.3"))
    cmp = compare_runs([root / "slow", partial])
    assert cmp.diff_keys == ["optim.lr"]
    row = dict(zip(cmp.headers, cmp.rows[1]))
    assert row["optim.lr"] == "0.3" and row["epochs"] is None and row["test acc"] is None
    assert read_run(root / "fast").test_acc is not None


def test_folders_that_are_not_runs_are_skipped_with_a_note(two_runs, tmp_path, capsys):
    """`trickbag report runs/*` over runs beside an ablation / sweep / lr-find folder and a stray file."""
    root, _ = two_runs
    sweep = tmp_path / "sweep-digits"
    (sweep / "trials").mkdir(parents=True)
    (sweep / "best_recipe.yaml").write_text("name: x\n")
    stray = tmp_path / "notes.txt"
    stray.write_text("x")
    out = tmp_path / "rep"
    assert main(["report", str(root / "slow"), str(sweep), str(stray), str(root / "fast"), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if line.startswith("trickbag: note:")]
    assert notes == [f"trickbag: note: skipping {str(p)!r}: not a run directory (a run directory holds recipe.yaml)"
                     for p in (sweep, stray)]
    with open(out / "table.csv", newline="") as f:
        assert [r["run"] for r in csv.DictReader(f)] == ["slow", "fast"]


def test_report_errors_are_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"trickbag: error: {str(tmp_path)!r} is not a trickbag run directory (no recipe.yaml)"]
    (tmp_path / "a").mkdir()
    assert main(["report", str(tmp_path), str(tmp_path / "a"), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["trickbag: error: none of the 2 given paths is a trickbag run directory (a run directory holds "
                   "recipe.yaml)"]
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    with pytest.raises(ExperimentError, match="no recipe.yaml"):  # one folder read directly must be a run
        read_run(tmp_path)
