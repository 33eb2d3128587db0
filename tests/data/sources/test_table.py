"""CSV tables as people have them: text columns (one-hot categories), missing cells (training-mean fill and
a missing indicator), ``;`` / tab delimiters; against a naive encoding written here."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from trickbag.cli import main
from trickbag.data.sources.table import MAX_CATEGORIES, _column_specs, _encoder, csv_table
from trickbag.data.sources.table_state import read_cells
from trickbag.errors import DataError
from trickbag.recipe import load_recipe

HEADER = ["size", "colour", "weight", "label"]
ROWS = [["1.0", "red", "3"], ["2.0", "blue", ""], ["", "red", "5"], ["4.0", "green", "NA"], ["5.0", "", "7"]]


def _cfg(path, *extra):
    return load_recipe("tabular", [f"data.root={path}", "data.label_column=label", *extra]).data


def _write(path, header, rows, sep=","):
    path.write_text("\n".join(sep.join(r) for r in [header, *rows]) + "\n", encoding="utf-8")
    return path


def test_text_columns_become_categories_and_missing_cells_nan(tmp_path):
    rows = [r + [str(i % 2)] for i, r in enumerate(ROWS)]
    cfg = _cfg(_write(tmp_path / "t.csv", HEADER, rows))
    feats = HEADER[:3]
    columns = _column_specs(cfg, HEADER, rows, feats)
    assert [c["type"] for c in columns] == ["number", "category", "number"]
    assert columns[1]["categories"] == ["blue", "green", "red"]  # the empty cell is missing, not a category
    x = read_cells(columns, HEADER, rows, "t.csv")
    want = [[1, 2, 3], [2, 0, math.nan], [math.nan, 2, 5], [4, 1, math.nan], [5, math.nan, 7]]
    assert torch.equal(torch.isnan(x), torch.isnan(torch.tensor(want)))
    assert torch.equal(torch.nan_to_num(x), torch.nan_to_num(torch.tensor(want, dtype=torch.float32)))


def test_encoder_one_hot_fill_with_training_mean_and_indicator_against_a_naive_encoding(tmp_path):
    rows = [r + [str(i % 2)] for i, r in enumerate(ROWS)]
    cfg = _cfg(_write(tmp_path / "t.csv", HEADER, rows))
    feats = HEADER[:3]
    columns = _column_specs(cfg, HEADER, rows, feats)
    x = read_cells(columns, HEADER, rows, "t.csv").unsqueeze(1)
    train = np.array([0, 1, 2, 4])  # row 3 is "held out": its weight is not in the fill value
    got = _encoder(x, torch.tensor([0, 1, 0, 1, 0]), cfg, columns)(train)(x)[:, 0]

    def naive(row):
        size, colour, weight = row
        size_mean = np.mean([1.0, 2.0, 5.0])  # training rows with a size
        weight_mean = np.mean([3.0, 5.0, 7.0])
        hot = [float(colour == c) for c in ("blue", "green", "red")] + [float(colour not in ("blue", "green", "red"))]
        return [size_mean if size == "" else float(size), float(size == ""), *hot,
                weight_mean if weight in ("", "NA") else float(weight), float(weight in ("", "NA"))]

    want = torch.tensor([naive(r[:3]) for r in rows], dtype=torch.float32)
    assert got.shape == want.shape == (5, 1 + 1 + 4 + 1 + 1)
    assert torch.allclose(got, want)


def test_unseen_category_and_missing_at_predict_time_stay_bounded(tmp_path):
    rng = random.Random(0)
    rows = []
    for _ in range(120):
        a, colour = rng.random(), rng.choice(["red", "blue", "green"])
        rows.append([f"{a:.3f}", colour, "yes" if colour == "red" or a > 0.8 else "no"])
    path = _write(tmp_path / "c.csv", ["a", "colour", "label"], rows)
    splits = csv_table(_cfg(path))
    raw = splits.read_rows(["a", "colour", "label"], [["0.5", "purple", "?"], ["", "red", "?"]], "q.csv")
    x = splits.prepare(raw)
    assert torch.isfinite(x).all() and x.abs().max() < 10  # the never-seen slot is centred, not divided by ~0


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_other_delimiters_read_as_the_comma_file(tmp_path, sep):
    rows = [[f"{i / 7:.4f}", f"{(i * 3) % 5}", str(i % 3)] for i in range(60)]
    header = ["a", "b", "label"]
    comma = csv_table(_cfg(_write(tmp_path / "c.csv", header, rows)))
    other = csv_table(_cfg(_write(tmp_path / "o.csv", header, rows, sep)))
    for part in ("train", "val", "test"):
        a, b = getattr(comma, part), getattr(other, part)
        assert len(a) == len(b) and all(torch.equal(a[i][0], b[i][0]) for i in range(len(a)))


def test_a_text_column_with_too_many_values_is_refused_naming_it(tmp_path, capsys):
    rows = [[f"name{i}", f"{i / 10}", str(i % 2)] for i in range(2 * MAX_CATEGORIES + 10)]
    path = _write(tmp_path / "n.csv", ["name", "a", "label"], rows)
    with pytest.raises(DataError, match=r"feature column 'name' holds text with 110 distinct values .*"
                                        r"data.feature_columns=\[a\]"):
        csv_table(_cfg(path))
    code = main(["train", "tabular", f"data.root={path}", "data.label_column=label", f"run.dir={tmp_path / 'r'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and not (tmp_path / "r").exists()


def test_a_table_with_text_and_missing_values_trains_to_its_rule(tmp_path):
    """label = yes when colour is red or a > 0.8: only learnable if the category is used."""
    rng = random.Random(1)
    rows = []
    for i in range(300):
        a, colour = rng.random(), rng.choice(["red", "blue", "green", "grey"])
        label = "yes" if colour == "red" or a > 0.8 else "no"
        rows.append([f"{a:.3f}" if i % 11 else "", colour, f"{rng.random():.3f}", label])
    path = _write(tmp_path / "t.csv", ["a", "colour", "noise", "label"], rows, ";")
    from trickbag.runs.run import run_recipe

    result = run_recipe(load_recipe("tabular", [f"data.root={path}", "data.label_column=label", "train.epochs=40",
                                                 f"run.dir={tmp_path}", "run.name=t", "run.plots=false",
                                                 "log.tensorboard=false", "run.progress=false"]), quiet=True)
    assert result.test["test/acc"] > 0.85  # colour alone gives 0.75 + ...; ignoring it, about 0.65


def test_a_date_column_becomes_days_month_weekday_and_yearday(tmp_path):
    import datetime

    rng = random.Random(2)
    days = [datetime.date(2020, 1, 1) + datetime.timedelta(days=rng.randrange(900)) for _ in range(80)]
    rows = [[d.isoformat() if i % 9 else "", f"{rng.random():.3f}", str(i % 2)] for i, d in enumerate(days)]
    cfg = _cfg(_write(tmp_path / "d.csv", ["when", "a", "label"], rows))
    columns = _column_specs(cfg, ["when", "a", "label"], rows, ["when", "a"])
    assert [c["name"] for c in columns] == ["when.days", "when.month", "when.weekday", "when.yearday", "a"]
    x = read_cells(columns, ["when", "a", "label"], rows, "d.csv")
    for i, d in enumerate(days):
        if i % 9 == 0:
            assert torch.isnan(x[i, :4]).all()
            continue
        want = [(d - datetime.date(1970, 1, 1)).days, d.month, d.weekday(), d.timetuple().tm_yday]
        assert x[i, :4].tolist() == [float(v) for v in want]
    splits = csv_table(cfg)  # trains: 4 date numbers, each with a missing indicator, and a
    assert splits.input_shape == (1, 4 * 2 + 1)


def test_every_unusable_column_is_named_in_one_message(tmp_path):
    rows = [[f"name{i}", f"id-{i}", f"{i / 10}", str(i % 2)] for i in range(120)]
    path = _write(tmp_path / "n.csv", ["name", "code", "a", "label"], rows)
    with pytest.raises(DataError) as err:
        csv_table(_cfg(path))
    msg = str(err.value)
    assert "'name'" in msg and "'code'" in msg and "data.feature_columns=[a]" in msg and "\n" not in msg


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_an_empty_label_cell_is_named_as_empty(tmp_path, task):
    rows = [[f"{i / 10}", str(i % 2)] for i in range(40)]
    rows[6][1] = ""
    rows[20][1] = ""
    path = _write(tmp_path / "e.csv", ["a", "label"], rows)
    with pytest.raises(DataError, match=r"the label column 'label' has no label on 2 of 40 rows \(lines 8, 22; "):
        csv_table(_cfg(path, f"task.type={task}"), load_recipe("tabular", [f"task.type={task}"]).task)
