"""Sweeps on Optuna: space validation against the recipe schema, the pruning plug-in against the median
rule, a tiny real sweep that resumes from its SQLite file, the best recipe file, and CLI errors."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

optuna = pytest.importorskip("optuna")

from trickbag.cli import main  # noqa: E402
from trickbag.config import load_recipe  # noqa: E402
from trickbag.experiments import ExperimentError  # noqa: E402
from trickbag.experiments.sweep import PruningReporter, load_space, parse_space, run_sweep  # noqa: E402
from trickbag.train.trainer import Trainer  # noqa: E402

TINY = ["data.name=fake", "data.num_samples=64", "model.name=mlp", "data.batch_size=16", "train.epochs=1",
        "log.tensorboard=false", "run.plots=false"]


def write(path, text):
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- space
def test_space_errors_name_the_key_and_what_is_allowed():
    cases = [
        ({"optim.lr": {"type": "logg", "low": 1e-3, "high": 1}}, "type 'logg' is not allowed (did you mean 'log'?)"),
        ({"optim.lr": {"type": "float", "low": 1}}, "type float needs `low` and `high`"),
        ({"optim.lr": {"type": "float", "low": 1, "high": 0.5}}, "need low < high, got low=1, high=0.5"),
        ({"data.batch_size": {"type": "int", "low": 8.5, "high": 64}}, "low must be an integer, got 8.5"),
        ({"optim.name": {"type": "categorical", "choices": []}}, "a categorical needs a non-empty list `choices`"),
        ({"optim.lr": {"type": "log", "low": 1e-3, "high": 1, "stepp": 2}}, "unknown field(s) stepp"),
        ({"run.name": {"type": "categorical", "choices": ["a"]}}, "run.* keys are set by the sweep itself"),
        ([], "must be a non-empty mapping"),
    ]
    for data, msg in cases:
        with pytest.raises(ExperimentError) as e:
            parse_space(data)
        assert msg in str(e.value) and "\n" not in str(e.value)


def test_space_is_checked_against_the_recipe_schema(tmp_path):
    recipe = load_recipe("digits")
    bad_key = write(tmp_path / "a.yaml", "optim.lrr: {type: log, low: 1.0e-3, high: 0.1}\n")
    with pytest.raises(ExperimentError, match=r"unknown recipe key 'optim.lrr' \(did you mean 'optim.lr'\?\)"):
        load_space(bad_key, recipe)
    bad_value = write(tmp_path / "b.yaml", "optim.momentum: {type: float, low: 0.5, high: 1.5}\n")
    with pytest.raises(ExperimentError, match=r"optim.momentum=1.5.*recipe key 'optim.momentum'"):
        load_space(bad_value, recipe)
    bad_choice = write(tmp_path / "c.yaml", "optim.name: {type: categorical, choices: [sgd, lion]}\n")
    with pytest.raises(ExperimentError, match="'lion' is not allowed"):
        load_space(bad_choice, recipe)
    ok = write(tmp_path / "d.yaml", "optim.lr: {type: log, low: 1.0e-3, high: 0.1, num: 3}\n"
                                    "data.batch_size: {type: int, low: 16, high: 64, step: 16}\n"
                                    "optim.weight_decay: {type: float, low: 0.0, high: 1.0e-3, step: 5.0e-4}\n")
    specs = {p.key: p for p in load_space(ok, recipe)}
    np.testing.assert_allclose(specs["optim.lr"].grid(), np.geomspace(1e-3, 0.1, 3), rtol=1e-12)
    assert specs["data.batch_size"].grid() == [16, 32, 48, 64]
    np.testing.assert_allclose(specs["optim.weight_decay"].grid(), [0.0, 5e-4, 1e-3], atol=1e-18)
    nogrid = parse_space({"optim.lr": {"type": "log", "low": 1e-3, "high": 0.1}})[0]
    with pytest.raises(ExperimentError, match="has no finite grid; add `num:`"):
        nogrid.grid()


# --------------------------------------------------------------------------- pruning plug-in
def _fit(trial, lr: float, zero: bool, epochs: int = 3):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 2, generator=g)
    y = (x[:, 0] > 0).long()  # half of each class, linearly separable
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    if zero:  # constant logits: argmax picks class 0, accuracy = share of class 0
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    reporter = PruningReporter(trial, "val/acc")
    t = Trainer(model, opt, DataLoader(TensorDataset(x, y), batch_size=32),
                DataLoader(TensorDataset(x, y), batch_size=128), plugins=[reporter], max_epochs=epochs, device="cpu")
    state = t.fit()
    return reporter, state, float((y == 0).float().mean())


def test_pruning_reporter_follows_the_median_rule_and_stops_the_run():
    study = optuna.create_study(direction="maximize",
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0))
    t0 = study.ask()
    good, state, _ = _fit(t0, lr=0.5, zero=False)
    assert not good.pruned and len(state.history) == 3
    assert [v for _, v in good.reported] == [h["val/acc"] for h in state.history]
    study.tell(t0, max(v for _, v in good.reported))
    # reference rule: prune at step s when this trial's best so far is below the median of finished trials at s
    t1 = study.ask()
    bad, state, share0 = _fit(t1, lr=0.0, zero=True)
    first = bad.reported[0][1]
    assert first == pytest.approx(share0)
    assert first < good.reported[0][1]  # so the median rule prunes at epoch 0 ...
    assert bad.pruned and len(state.history) == 1 and state.should_stop  # ... and the run stops there
    assert "pruned" in state.stop_reason
    study.tell(t1, state=optuna.trial.TrialState.PRUNED)
    t2 = study.ask()  # as good as the median: never strictly worse, never pruned
    same, state, _ = _fit(t2, lr=0.5, zero=False)
    assert not same.pruned and len(state.history) == 3


# --------------------------------------------------------------------------- a tiny real sweep
def _trials(url, name):
    return {t.number: (t.state, t.value, dict(t.params)) for t in optuna.load_study(study_name=name, storage=url).trials}


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
    # the objective is the best val/acc of the trial's own metrics.csv
    for n, (state, value, params) in first.items():
        if state != optuna.trial.TrialState.COMPLETE:
            continue
        with open(tmp_path / "out" / "trials" / f"trial-{n:04d}" / "metrics.csv", newline="") as f:
            accs = [float(r["val/acc"]) for r in csv.DictReader(f) if r.get("val/acc")]
        assert value == pytest.approx(max(accs), rel=1e-5)  # metrics.csv keeps 6 digits
    with pytest.raises(ExperimentError, match="already exists .*add --resume"):
        run_sweep("digits", space, trials=1, stream=io.StringIO(), **kw)
    r2 = run_sweep("digits", space, trials=2, resume=True, pruner="none", stream=log, **kw)
    assert r2.ran == [3, 4]
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


def test_grid_sweep_stops_when_the_grid_is_exhausted(tmp_path):
    space = write(tmp_path / "space.yaml", "optim.momentum: {type: categorical, choices: [0.0, 0.9]}\n")
    res = run_sweep("digits", space, sampler="grid", trials=5, overrides=TINY, out=tmp_path / "g",
                    pruner="none", stream=io.StringIO())
    study = optuna.load_study(study_name=res.study_name, storage=res.storage)
    assert sorted(t.params["optim.momentum"] for t in study.trials) == [0.0, 0.9]
    assert res.storage == f"sqlite:///{(tmp_path / 'g' / 'sweep.db').resolve()}"


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
    assert not out.exists()
