"""Sweeps end to end: a tiny real sweep whose trials are full runs (checkpoints, test of best.pt, summary)
and that resumes from its SQLite file; a pruned trial; a grid that runs only its points and says so; the
best recipe file and CLI errors."""

from __future__ import annotations

import csv
import io
import re

import pytest

optuna = pytest.importorskip("optuna")

from trickbag.cli import main  # noqa: E402
from trickbag.experiments import ExperimentError  # noqa: E402
from trickbag.experiments.sweep import parse_space, run_sweep  # noqa: E402
from trickbag.experiments.sweep.study import Objective  # noqa: E402
from trickbag.recipe import load_recipe  # noqa: E402

TINY = ["data.name=fake", "data.num_samples=64", "model.name=mlp", "data.batch_size=16", "train.epochs=1",
        "log.tensorboard=false", "run.plots=false"]


def write(path, text):
    path.write_text(text)
    return path


def _trials(url, name):
    return {
        t.number: (t.state, t.value, dict(t.params)) for t in optuna.load_study(study_name=name, storage=url).trials
    }


def _summary_test_acc(run_dir):
    return float(re.search(r"^test acc\s+([0-9.]+)", (run_dir / "summary.txt").read_text(), re.M).group(1))


def test_tiny_sweep_resumes_from_sqlite_and_writes_a_best_recipe(tmp_path):
    space = write(tmp_path / "space.yaml", "optim.lr: {type: log, low: 1.0e-3, high: 0.5}\n"
                                           "optim.momentum: {type: float, low: 0.0, high: 0.9}\n")
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    kw = dict(overrides=TINY, storage=url, study_name="t", out=tmp_path / "out", sampler="random")
    log = io.StringIO()
    r1 = run_sweep("digits", space, trials=3, stream=log, **kw)
    assert r1.ran == [0, 1, 2]
    first = _trials(url, "t")
    assert sorted(first) == [0, 1, 2]
    study = optuna.load_study(study_name="t", storage=url)
    for t in study.trials:
        # every trial is a full run: its recipe, metrics, checkpoints, the test of best.pt and a summary
        run_dir = tmp_path / "out" / "trials" / f"trial-{t.number:04d}"
        assert t.user_attrs["run_dir"] == str(run_dir)
        assert (run_dir / "checkpoints" / "best.pt").is_file() and (run_dir / "recipe.yaml").is_file()
        assert t.user_attrs["test"]["test/acc"] == pytest.approx(_summary_test_acc(run_dir), abs=5e-5)
        assert load_recipe(str(run_dir / "recipe.yaml")).optim.lr == t.params["optim.lr"]
        if t.state != optuna.trial.TrialState.COMPLETE:
            continue
        # the objective is the best val/acc of the trial's own metrics.csv
        with open(run_dir / "metrics.csv", newline="") as f:
            accs = [float(r["val/acc"]) for r in csv.DictReader(f) if r.get("val/acc")]
        assert t.value == pytest.approx(max(accs), rel=1e-5)  # metrics.csv keeps 6 digits
    with pytest.raises(ExperimentError, match="already exists .*add --resume"):
        run_sweep("digits", space, trials=1, stream=io.StringIO(), **kw)
    r2 = run_sweep("digits", space, trials=2, resume=True, pruner="none", stream=log, **kw)
    assert r2.ran == [3, 4]
    assert "3 trials already in" in log.getvalue() and "running 2 more" in log.getvalue()
    after = _trials(url, "t")
    assert sorted(after) == [0, 1, 2, 3, 4]
    assert {n: after[n] for n in first} == first  # the first trials are kept, not re-run
    assert after[3][2] != after[0][2]  # the resumed sampler does not replay the first suggestions
    # best recipe: ready to train, with the best trial's values
    study = optuna.load_study(study_name="t", storage=url)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert r2.best_value == max(t.value for t in done)
    best = load_recipe(str(r2.best_recipe))
    assert best.optim.lr == study.best_params["optim.lr"]
    assert best.optim.momentum == study.best_params["optim.momentum"]
    assert (best.data.name, best.model.name, best.run.name) == ("fake", "mlp", None)
    # report files
    assert (tmp_path / "out" / "history.png").read_bytes()[:4] == b"\x89PNG"
    assert len(done) >= 4 and set(r2.importances) == {"optim.lr", "optim.momentum"}
    assert sum(r2.importances.values()) == pytest.approx(1.0)
    assert (tmp_path / "out" / "importances.png").is_file()
    table = (tmp_path / "out" / "trials.md").read_text()
    ranked = sorted(done, key=lambda t: t.value, reverse=True)
    assert table.splitlines()[2].split("|")[2].strip() == str(ranked[0].number)
    # resuming with another space is refused
    other = write(tmp_path / "other.yaml", "optim.lr: {type: log, low: 1.0e-3, high: 0.1}\n")
    with pytest.raises(ExperimentError, match="different space"):
        run_sweep("digits", other, trials=1, resume=True, stream=io.StringIO(), **kw)


class _PruneAtOnce:
    """An Optuna trial stand-in whose pruner gives up on the first report."""

    number = 7

    def __init__(self) -> None:
        self.user_attrs: dict = {}
        self.reports: list = []

    def suggest_float(self, name, low, high, log=False, step=None):
        return 0.05

    def set_user_attr(self, key, value):
        self.user_attrs[key] = value

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        return True


def test_a_pruned_trial_is_a_stopped_run_with_checkpoints_test_and_summary(tmp_path):
    base = load_recipe("digits", [*TINY, "train.epochs=3"]).model_dump(mode="json")
    specs = parse_space({"optim.lr": {"type": "log", "low": 1e-3, "high": 0.5}})
    trial, log = _PruneAtOnce(), io.StringIO()
    objective = Objective(optuna, base, specs, "val/acc", "maximize", tmp_path / "trials", log)
    with pytest.raises(optuna.TrialPruned):
        objective(trial)
    run_dir = tmp_path / "trials" / "trial-0007"
    assert len(trial.reports) == 1 and trial.reports[0][0] == 0  # stopped after the first of 3 epochs
    summary = (run_dir / "summary.txt").read_text()
    assert re.search(r"^stopped\s+pruned: by the sweep at epoch 1", summary, re.M)
    assert (run_dir / "checkpoints" / "best.pt").is_file()
    assert trial.user_attrs["test"]["test/acc"] == pytest.approx(_summary_test_acc(run_dir), abs=5e-5)
    with open(run_dir / "metrics.csv", newline="") as f:
        assert sum(1 for r in csv.DictReader(f) if r.get("train/loss")) == 1
    assert "trial 7: pruned after epoch 1" in log.getvalue() and objective.ran == [7]


def test_grid_sweep_runs_only_its_points_and_says_how_many(tmp_path):
    space = write(tmp_path / "space.yaml", "optim.momentum: {type: categorical, choices: [0.0, 0.9]}\n")
    log = io.StringIO()
    kw = dict(sampler="grid", overrides=TINY, out=tmp_path / "g", pruner="none")
    res = run_sweep("digits", space, trials=5, stream=log, **kw)
    assert "running 2 more (the grid has 2 unvisited points)" in log.getvalue() and "running 5" not in log.getvalue()
    study = optuna.load_study(study_name=res.study_name, storage=res.storage)
    assert sorted(t.params["optim.momentum"] for t in study.trials) == [0.0, 0.9]
    assert res.storage == f"sqlite:///{(tmp_path / 'g' / 'sweep.db').resolve()}"
    log = io.StringIO()
    again = run_sweep("digits", space, trials=3, resume=True, stream=log, **kw)  # nothing left: no trial runs
    assert "2 trials already in" in log.getvalue() and "running 0 more" in log.getvalue() and again.ran == []
    assert len(optuna.load_study(study_name=res.study_name, storage=res.storage).trials) == 2


def test_command_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["sweep", *TINY, "--space", str(tmp_path / "missing.yaml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0] and err[0].startswith("trickbag: error: --space")
    space = write(tmp_path / "s.yaml", "optim.lrr: {type: log, low: 1.0e-3, high: 0.1}\n")
    assert main(["sweep", *TINY, "--space", str(space), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown recipe key 'optim.lrr' (did you mean 'optim.lr'?)" in err[0]
    assert main(["sweep", *TINY, "--space", str(space), "--metric", "test/acc", "--out", str(out)]) == 2
    assert "would leak the test set" in capsys.readouterr().err
    nogrid = write(tmp_path / "n.yaml", "optim.lr: {type: log, low: 1.0e-3, high: 0.1}\n")
    assert main(["sweep", *TINY, "--space", str(nogrid), "--sampler", "grid", "--out", str(out)]) == 2
    assert "has no finite grid" in capsys.readouterr().err
    assert not out.exists()
