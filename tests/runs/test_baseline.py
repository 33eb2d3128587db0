"""A table's run prints the linear baseline fitted on its own split; with no recipe named, a CSV run beats it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sklearn import datasets
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import accuracy_score, r2_score

from trickbag.cli import main
from trickbag.data.sources import build_data
from trickbag.recipe import load_recipe

QUIET = ["run.progress=false", "run.plots=false", "log.tensorboard=false", "train.threads=1"]
LINE = re.compile(r"^baseline   (least squares|logistic regression) on the same split: test (r2|acc) (-?\d\.\d{4}) "
                  r"\(this run (-?\d\.\d{4})\)$", re.M)


def _csv(folder: Path, name: str) -> Path:
    path = folder / f"{name}.csv"
    getattr(datasets, f"load_{name}")(as_frame=True).frame.to_csv(path, index=False)
    return path


def _train(tmp_path: Path, capsys, *items: str) -> tuple[str, str, str]:
    """``trickbag train ITEMS`` in this process: (summary.txt, what it printed, what it said on stderr)."""
    runs = tmp_path / "runs"
    assert main(["train", *items, f"run.dir={runs}", "run.name=r", *QUIET]) == 0
    out = capsys.readouterr()
    return (runs / "r" / "summary.txt").read_text(), out.out, out.err


def _sklearn_reference(path: Path, task: str) -> float:
    """scikit-learn's own fit and score on the run's split: the training and test rows as the recipe's data
    source prepared them (standardised with the training statistics)."""
    recipe = load_recipe("tabular", [f"data.root={path}", f"task.type={task}"])
    splits = build_data(recipe.data, recipe.task)
    x, y, xt, yt = splits.train.x.numpy(), splits.train.y.numpy(), splits.test.x.numpy(), splits.test.y.numpy()
    x, xt = x.reshape(len(x), -1), xt.reshape(len(xt), -1)
    if task == "regression":  # R^2 is the same on standardised targets and in the target's units
        return r2_score(yt.reshape(-1), LinearRegression().fit(x, y.reshape(-1)).predict(xt))
    return accuracy_score(yt, LogisticRegression(max_iter=1000).fit(x, y).predict(xt))


@pytest.mark.parametrize(("table", "task", "model"), [("wine", "classification", "logistic regression"),
                                                      ("diabetes", "regression", "least squares")])
def test_the_baseline_line_is_scikit_learns_fit_on_the_same_split(tmp_path, capsys, table, task, model):
    path = _csv(tmp_path, table)
    summary, printed, _ = _train(tmp_path, capsys, "tabular", f"data.root={path}", f"task.type={task}",
                                 "train.epochs=2")
    (m,) = LINE.finditer(summary)
    assert m.group(0) in printed  # the printed summary holds the same line
    assert m.group(1) == model
    assert float(m.group(3)) == pytest.approx(_sklearn_reference(path, task), abs=1e-4)
    this = re.search(rf"^test {m.group(2)}\s+(-?\d\.\d{{4}})", summary, re.M)
    assert m.group(4) == this.group(1)  # "this run": the run's own test metric


def test_a_large_table_skips_the_baseline_and_says_so(tmp_path, capsys, monkeypatch):
    import trickbag.runs.baseline as baseline

    monkeypatch.setattr(baseline, "MAX_ROWS", 50)
    summary, _, _ = _train(tmp_path, capsys, "tabular", f"data.root={_csv(tmp_path, 'wine')}", "train.epochs=1")
    assert re.search(r"^baseline   logistic regression not fitted: 1\d\d training rows, above 50$", summary, re.M)


def test_no_baseline_for_images_or_multilabel():
    from types import SimpleNamespace as NS

    from trickbag.runs.baseline import table_baseline

    assert table_baseline(NS(kind="image", test=[0]), NS(name="classification")) is None
    assert table_baseline(NS(kind="tabular", test=[0]), NS(name="multilabel")) is None
    assert table_baseline(NS(kind="tabular", test=None), NS(name="regression")) is None


@pytest.mark.parametrize(("table", "task"), [("diabetes", "regression"), ("wine", "classification")])
def test_a_csv_with_no_recipe_named_reaches_the_linear_baseline(tmp_path, capsys, table, task):
    """The whole recipe a user gets (120 epochs of a few updates each); benchmarks/tabular.py measures it over
    5 splits x 3 seeds."""
    summary, _, err = _train(tmp_path, capsys, "data.name=csv", f"data.root={_csv(tmp_path, table)}",
                             "data.label_column=target", f"task.type={task}")
    assert "trains with the tabular recipe" in err
    (m,) = LINE.finditer(summary)
    assert float(m.group(4)) >= float(m.group(3)) - 0.01, m.group(0)
