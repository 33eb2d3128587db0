"""Missing labels in a CSV table: ``data.missing_labels`` and ``data.drop_unlabelled``.

A regression target with ``NA`` cells is refused in one line naming the rows' count and the key to set; with
``data.drop_unlabelled=true`` the run trains on exactly the labelled rows (checked against the file's own
numbers) and says how many it left out; a numeric column with ``NA`` is not trained as hundreds of classes; a
class label that looks like a missing mark is named at run start, and left out when the user says it is one.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from trickbag.cli import main
from trickbag.data.sources.table import csv_table
from trickbag.errors import DataError
from trickbag.recipe import load_recipe

MISSING_AT = (5, 17, 40)  # data rows (0-based) whose label is missing: file lines 7, 19, 42
RUN = ["train.epochs=1", "run.progress=false", "run.plots=false", "log.tensorboard=false"]


def _regression_file(tmp_path: Path, mark: str = "NA") -> tuple[Path, list[float]]:
    """200 rows ``a,b,target`` (target = 3a + 2b + noise); three targets are ``mark``; also the labelled targets."""
    r = random.Random(0)
    lines, labelled = ["a,b,target"], []
    for i in range(200):
        a, b = r.random(), r.random()
        t = round(3 * a + 2 * b + 0.1 * r.random(), 3)
        lines.append(f"{a:.3f},{b:.3f},{mark if i in MISSING_AT else t}")
        if i not in MISSING_AT:
            labelled.append(t)
    path = tmp_path / "reg.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, labelled


def _class_file(tmp_path: Path, mark: str = "NA") -> Path:
    r = random.Random(1)
    lines = ["a,b,label"]
    for i in range(200):
        a, b = r.random(), r.random()
        lines.append(f"{a:.3f},{b:.3f},{mark if i in MISSING_AT else ('cat' if a > b else 'dog')}")
    path = tmp_path / "cls.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _targets(splits) -> list[float]:
    """Every target of the three splits, in the file's units (the run standardises them on the training split)."""
    mean, std = splits.target_mean[0], splits.target_std[0]
    out = []
    for ds in (splits.train, splits.val, splits.test):
        out += [float(ds[i][1].reshape(-1)[0]) * std + mean for i in range(len(ds))]
    return out


@pytest.mark.parametrize("mark", ["NA", "", "NaN"])
def test_a_regression_target_with_missing_cells_is_refused_naming_the_count_and_the_key(tmp_path, capsys, mark):
    path, _ = _regression_file(tmp_path, mark)
    rc = main(["train", "data.name=csv", f"data.root={path}", "data.label_column=target", "task.type=regression",
               f"run.dir={tmp_path / 'runs'}", *RUN])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err, err
    assert "no label on 3 of 200 rows" in err and "lines 7, 19, 42" in err and "data.drop_unlabelled=true" in err
    assert not (tmp_path / "runs").exists()


def test_drop_unlabelled_trains_on_exactly_the_labelled_rows_and_says_how_many(tmp_path, capsys):
    path, labelled = _regression_file(tmp_path)
    recipe = load_recipe("tabular", [f"data.root={path}", "data.label_column=target", "task.type=regression",
                                     "data.drop_unlabelled=true"])
    splits = csv_table(recipe.data, recipe.task)
    got = _targets(splits)
    assert len(got) == 197
    assert sorted(round(v, 3) for v in got) == sorted(labelled)  # the file's numbers, the NA rows left out
    (note,) = [n for n in splits.notes if "drop_unlabelled" in n]
    assert "3 of 200 rows" in note and "lines 7, 19, 42" in note and "other 197" in note

    rc = main(["train", "tabular", f"data.root={path}", "data.label_column=target", "task.type=regression",
               "data.drop_unlabelled=true", f"run.dir={tmp_path / 'runs'}", "run.name=r", *RUN])
    out = capsys.readouterr().out
    assert rc == 0 and "data.drop_unlabelled: 3 of 200 rows have no label" in out


def test_a_numeric_target_with_na_cells_is_not_trained_as_classes(tmp_path, capsys):
    path, _ = _regression_file(tmp_path)
    rc = main(["train", "data.name=csv", f"data.root={path}", "data.label_column=target",
               f"run.dir={tmp_path / 'runs'}", *RUN])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err, err
    assert "a continuous target" in err and "task.type=regression" in err and "'NA'" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("mark", ["NA", "N/A", "NaN", "null", "None", "?"])
def test_a_class_label_that_looks_missing_is_named_at_run_start(tmp_path, mark):
    recipe = load_recipe("tabular", [f"data.root={_class_file(tmp_path, mark)}", "data.label_column=label"])
    splits = csv_table(recipe.data, recipe.task)
    assert splits.classes == sorted(["cat", "dog", mark])  # trained as a class, as the user's file says ...
    (note,) = [n for n in splits.notes if "looks like a missing label" in n]  # ... and named
    assert f"{mark!r} in 3 rows" in note and f"data.missing_labels=[{mark}] data.drop_unlabelled=true" in note


def test_a_class_label_declared_missing_is_left_out(tmp_path):
    path = _class_file(tmp_path)
    recipe = load_recipe("tabular", [f"data.root={path}", "data.label_column=label", "data.missing_labels=[NA]",
                                     "data.drop_unlabelled=true"])
    splits = csv_table(recipe.data, recipe.task)
    assert splits.classes == ["cat", "dog"]
    assert sum(len(ds) for ds in (splits.train, splits.val, splits.test)) == 197
    assert not [n for n in splits.notes if "looks like a missing label" in n]
    bare = load_recipe("tabular", [f"data.root={path}", "data.label_column=label", "data.missing_labels=[NA]"])
    with pytest.raises(DataError, match=r"no label on 3 of 200 rows .*data.missing_labels: 'NA'"):
        csv_table(bare.data, bare.task)


def test_every_row_unlabelled_is_refused_even_when_dropping(tmp_path):
    path = tmp_path / "none.csv"
    path.write_text("a,target\n" + "".join(f"{i},NA\n" for i in range(30)))
    recipe = load_recipe("tabular", [f"data.root={path}", "data.label_column=target", "task.type=regression",
                                     "data.drop_unlabelled=true"])
    with pytest.raises(DataError, match="every row lacks its label"):
        csv_table(recipe.data, recipe.task)


def test_the_keys_belong_to_csv(capsys):
    assert main(["train", "digits", "data.drop_unlabelled=true"]) == 2
    assert "data.drop_unlabelled" in capsys.readouterr().err


def test_a_resume_drops_the_same_rows(tmp_path):
    """The stored encoding is reused on resume; the rows it trains on are the same labelled rows."""
    path, _ = _regression_file(tmp_path)
    recipe = load_recipe("tabular", [f"data.root={path}", "data.label_column=target", "task.type=regression",
                                     "data.drop_unlabelled=true"])
    first = csv_table(recipe.data, recipe.task)
    fitted = {**first.fitted, "target_mean": first.target_mean, "target_std": first.target_std}
    again = csv_table(recipe.data, recipe.task, fitted=fitted)
    for a, b in ((first.train, again.train), (first.val, again.val), (first.test, again.test)):
        assert len(a) == len(b)
        assert all(torch.equal(a[i][0], b[i][0]) and torch.equal(a[i][1], b[i][1]) for i in range(len(a)))
